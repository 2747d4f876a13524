// Per-row dynamic FP8 (e4m3) quantisation of GEMM activations: one block per row, the row held in
// registers between its absolute maximum and the scaling, so the input is read once.
#include <cuda_fp8.h>

#include "common.cuh"

namespace voxcpm {
namespace {

constexpr float kE4m3Max = 448.f;
constexpr int kMaxK = 16384;

// silu as swiglu.cu computes it (x / (1 + exp(-x)) in fp32, accurate expf), so the SwiGLU activation
// quantised here is the one the swiglu op would have written.
__device__ __forceinline__ float silu(float v) { return v / (1.f + expf(-v)); }

__device__ __forceinline__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0.f;
    return warp_max(v);
}

// VEC e4m3 codes stored as one access (VEC bytes).
template <int VEC> struct alignas(VEC) Fp8Vec {
    __nv_fp8x2_storage_t pairs[VEC / 2];
};

// Vector j of thread t covers output columns [(j * blockDim.x + t) * VEC, + VEC), so a warp's
// accesses are contiguous. SWIGLU: the row of x is [gate (k) | up (k)] and y = silu(gate) * up with
// both roundings of the swiglu op; otherwise y = x.
template <typename T, int VEC, int MAXV, bool SWIGLU>
__global__ void __launch_bounds__(256) quantize_fp8_kernel(const T* __restrict__ x, uint8_t* __restrict__ out,
                                                           float* __restrict__ scale, int k) {
    __shared__ float scratch[32];
    pdl_launch_dependents();
    pdl_wait();
    const int64_t row = blockIdx.x;
    const T* in = x + row * (SWIGLU ? 2 * static_cast<int64_t>(k) : k);
    float y[MAXV][VEC];
    float absmax = 0.f;
#pragma unroll
    for (int j = 0; j < MAXV; ++j) {
        const int i = (j * blockDim.x + threadIdx.x) * VEC;
        if (i < k) {
            load_vec<T, VEC>(in + i, y[j]);
            if (SWIGLU) {
                float up[VEC];
                load_vec<T, VEC>(in + k + i, up);
#pragma unroll
                for (int e = 0; e < VEC; ++e) y[j][e] = round_to<T>(round_to<T>(silu(y[j][e])) * up[e]);
            }
#pragma unroll
            for (int e = 0; e < VEC; ++e) absmax = fmaxf(absmax, fabsf(y[j][e]));
        }
    }
    absmax = block_max(absmax, scratch);
    // An all-zero row keeps scale 1 (its codes are zeros either way) instead of dividing by zero.
    const float row_scale = absmax > 0.f ? absmax / kE4m3Max : 1.f;
    if (threadIdx.x == 0) scale[row] = row_scale;
    uint8_t* dst = out + row * k;
#pragma unroll
    for (int j = 0; j < MAXV; ++j) {
        const int i = (j * blockDim.x + threadIdx.x) * VEC;
        if (i < k) {
            Fp8Vec<VEC> codes;
#pragma unroll
            for (int e = 0; e < VEC; e += 2) {
                // True division (not a reciprocal product) and round-to-nearest-even with saturation,
                // matching the PyTorch reference bit for bit.
                const float2 pair = make_float2(y[j][e] / row_scale, y[j][e + 1] / row_scale);
                codes.pairs[e / 2] = __nv_cvt_float2_to_fp8x2(pair, __NV_SATFINITE, __NV_E4M3);
            }
            *reinterpret_cast<Fp8Vec<VEC>*>(dst + i) = codes;
        }
    }
}

template <typename T, int VEC, int MAXV>
int launch(const void* x, void* out, float* scale, int64_t rows, int64_t k, int activation, int threads,
           cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>(rows));
    const dim3 block(static_cast<unsigned>(threads));
    const auto* in = static_cast<const T*>(x);
    auto* codes = static_cast<uint8_t*>(out);
    if (activation == 1)
        return launch_kernel(quantize_fp8_kernel<T, VEC, MAXV, true>, grid, block, 0, stream, in, codes, scale,
                             static_cast<int>(k));
    return launch_kernel(quantize_fp8_kernel<T, VEC, MAXV, false>, grid, block, 0, stream, in, codes, scale,
                         static_cast<int>(k));
}

// Block size and vectors per thread for a row of `vectors` VEC-wide vectors: 128 threads holding up
// to 8 vectors each, then 256 threads (at most 64 values of the row per thread in registers).
template <typename T, int VEC>
int launch_for(const void* x, void* out, float* scale, int64_t rows, int64_t k, int activation, cudaStream_t stream) {
    const int64_t vectors = k / VEC;
    const int threads = vectors <= 128 * 8 ? 128 : 256;
    const int64_t per_thread = (vectors + threads - 1) / threads;
    if (per_thread <= 1) return launch<T, VEC, 1>(x, out, scale, rows, k, activation, threads, stream);
    if (per_thread <= 2) return launch<T, VEC, 2>(x, out, scale, rows, k, activation, threads, stream);
    if (per_thread <= 4) return launch<T, VEC, 4>(x, out, scale, rows, k, activation, threads, stream);
    if (per_thread <= 8) return launch<T, VEC, 8>(x, out, scale, rows, k, activation, threads, stream);
    return VOXCPM_ERROR_INVALID_ARGUMENT;
}

}  // namespace
}  // namespace voxcpm

extern "C" int voxcpm_quantize_fp8(const void* x, void* out, float* scale, int64_t rows, int64_t k,
                                   int activation, int dtype, void* stream) {
    using namespace voxcpm;
    if (rows < 0 || rows > 0x7fffffff || k <= 0 || k > kMaxK || k % 16 != 0) return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (activation != 0 && activation != 1) return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (x == nullptr || out == nullptr || scale == nullptr || !aligned16(x) || !aligned16(out))
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (rows == 0) return 0;
    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        return launch_for<T, 16 / sizeof(T)>(x, out, scale, rows, k, activation, s);
    });
}
