// SwiGLU on a fused gate_up projection output: one pass reading gate and up, writing the product.
#include "common.cuh"

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

extern "C" int voxcpm_swiglu(const void* gate_up, void* out, int64_t rows, int64_t inter, int dtype,
                             void* stream) {
    using namespace voxcpm;
    if (rows < 0 || inter <= 0 || gate_up == nullptr || out == nullptr) return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (rows == 0) return 0;
    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        constexpr int kVec = 16 / sizeof(T);
        if (inter % kVec == 0 && aligned16(gate_up) && aligned16(out))
            return launch<T, kVec>(gate_up, out, rows, inter, s);
        return launch<T, 1>(gate_up, out, rows, inter, s);
    });
}
