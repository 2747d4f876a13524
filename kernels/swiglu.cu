// SwiGLU on a fused gate_up projection output: one pass reading gate and up, writing the product.
// With norm_input (an LM layer whose post-attention RMSNorm weight is folded into its gate_up
// weight) gate and up are first scaled by their row's norm statistic, which each block computes from
// the norm's input row.
#include "common.cuh"
#include "row_statistic.cuh"

namespace voxcpm {
namespace {

template <typename T, int VEC>
__global__ void swiglu_kernel(const T* __restrict__ gate_up, T* __restrict__ out, int64_t rows,
                              int64_t inter) {
    pdl_launch_dependents();
    pdl_wait();
    const int64_t vectors_per_row = inter / VEC;
    const int64_t total = rows * vectors_per_row;
    for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
         idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t row = idx / vectors_per_row;
        const int64_t col = (idx - row * vectors_per_row) * VEC;
        const T* gate = gate_up + row * 2 * inter + col;
        float g[VEC], u[VEC], y[VEC];
        load_vec<T, VEC>(gate, g);
        load_vec<T, VEC>(gate + inter, u);
#pragma unroll
        for (int e = 0; e < VEC; ++e) y[e] = round_to<T>(silu(g[e])) * u[e];
        store_vec<T, VEC>(out + row * inter + col, y);
    }
}

constexpr int kScaledThreads = 256;

// blockIdx.y is the row, blockIdx.x a chunk of kScaledThreads vectors of it. The statistic comes
// after pdl_wait(), as rope_kv_write's. Each scaled value is rounded to T, as the GEMM's output of
// normed rows would be, before swiglu's own arithmetic.
template <typename T, int VEC, int NORM_VEC>
__global__ void __launch_bounds__(kScaledThreads) swiglu_scaled_kernel(const T* __restrict__ gate_up,
                                                                     const T* __restrict__ norm_input, int hidden,
                                                                     float eps, T* __restrict__ out, int64_t inter) {
    __shared__ float scratch[32];
    pdl_launch_dependents();
    pdl_wait();
    const int64_t row = blockIdx.y;
    const float factor = rms_scale(block_row_sum_squares<T, NORM_VEC>(norm_input + row * hidden, hidden, scratch),
                                   hidden, eps);
    const int64_t col = (static_cast<int64_t>(blockIdx.x) * kScaledThreads + threadIdx.x) * VEC;
    if (col >= inter) return;
    const T* gate = gate_up + row * 2 * inter + col;
    float g[VEC], u[VEC], y[VEC];
    load_vec<T, VEC>(gate, g);
    load_vec<T, VEC>(gate + inter, u);
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
        const float gs = round_to<T>(g[e] * factor);
        y[e] = round_to<T>(silu(gs)) * round_to<T>(u[e] * factor);
    }
    store_vec<T, VEC>(out + row * inter + col, y);
}

template <typename T, int VEC>
int launch_scaled(const void* gate_up, const void* norm_input, int64_t hidden, float eps, void* out, int64_t rows,
                  int64_t inter, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>((inter / VEC + kScaledThreads - 1) / kScaledThreads),
                    static_cast<unsigned>(rows));
    const auto kernel = row_vectors<T>(norm_input, hidden) ? swiglu_scaled_kernel<T, VEC, 16 / sizeof(T)>
                                                           : swiglu_scaled_kernel<T, VEC, 1>;
    return launch_kernel(kernel, grid, dim3(kScaledThreads), 0, stream, static_cast<const T*>(gate_up),
                         static_cast<const T*>(norm_input), static_cast<int>(hidden), eps, static_cast<T*>(out),
                         inter);
}

template <typename T, int VEC>
int launch(const void* gate_up, void* out, int64_t rows, int64_t inter, cudaStream_t stream) {
    constexpr int kThreads = 256;
    const int64_t total = rows * (inter / VEC);
    // Enough blocks to fill any current GPU several times over; the grid-stride loop covers the rest.
    const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, 132 * 16);
    return launch_kernel(swiglu_kernel<T, VEC>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream,
                         static_cast<const T*>(gate_up), static_cast<T*>(out), rows, inter);
}

}  // namespace
}  // namespace voxcpm

extern "C" int voxcpm_swiglu(const void* gate_up, const void* norm_input, int64_t hidden, float eps, void* out,
                             int64_t rows, int64_t inter, int dtype, void* stream) {
    using namespace voxcpm;
    if (rows < 0 || inter <= 0 || gate_up == nullptr || out == nullptr) return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (norm_input != nullptr && (hidden < 1 || hidden > 16384 || eps <= 0.f || rows > 65535))
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (rows == 0) return 0;
    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        constexpr int kVec = 16 / sizeof(T);
        const bool vectors = inter % kVec == 0 && aligned16(gate_up) && aligned16(out);
        if (norm_input != nullptr)
            return vectors ? launch_scaled<T, kVec>(gate_up, norm_input, hidden, eps, out, rows, inter, s)
                           : launch_scaled<T, 1>(gate_up, norm_input, hidden, eps, out, rows, inter, s);
        return vectors ? launch<T, kVec>(gate_up, out, rows, inter, s) : launch<T, 1>(gate_up, out, rows, inter, s);
    });
}
