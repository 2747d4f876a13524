// Per-row dynamic FP8 (e4m3) quantisation of GEMM activations: one warp (short rows) or one block per
// row, the row held in registers between its absolute maximum and the scaling, so the input is read once.
#include <cuda_fp8.h>

#include "common.cuh"

namespace voxcpm {
namespace {

constexpr float kE4m3Max = 448.f;
constexpr int kMaxK = 16384;

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

// A row is held by one warp (WARP_ROWS: rows of up to 256 vectors, several rows per block, no block
// barrier) or by the whole block. Vector j of the row's thread t covers output columns
// [(j * threads + t) * VEC, + VEC), so a warp's accesses are contiguous. SWIGLU: the row of x is
// [gate (k) | up (k)] and y = silu(gate) * up with both roundings of the swiglu op; otherwise y = x.
template <typename T, int VEC, int MAXV, bool SWIGLU, bool WARP_ROWS>
__global__ void __launch_bounds__(256) quantize_fp8_kernel(const T* __restrict__ x, uint8_t* __restrict__ out,
                                                           float* __restrict__ scale, int64_t rows, int k) {
    __shared__ float scratch[32];
    pdl_launch_dependents();
    pdl_wait();
    const int threads = WARP_ROWS ? 32 : blockDim.x;
    const int thread = WARP_ROWS ? (threadIdx.x & 31) : threadIdx.x;
    const int64_t row = WARP_ROWS ? static_cast<int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5)
                                  : static_cast<int64_t>(blockIdx.x);
    if (row >= rows) return;  // whole warps of the last block (never taken in block mode)
    const T* in = x + row * (SWIGLU ? 2 * static_cast<int64_t>(k) : k);
    float y[MAXV][VEC];
    float absmax = 0.f;
#pragma unroll
    for (int j = 0; j < MAXV; ++j) {
        const int i = (j * threads + thread) * VEC;
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
    absmax = WARP_ROWS ? warp_max(absmax) : block_max(absmax, scratch);
    // An all-zero row keeps scale 1 (its codes are zeros either way) instead of dividing by zero.
    const float row_scale = absmax > 0.f ? absmax / kE4m3Max : 1.f;
    if (thread == 0) scale[row] = row_scale;
    uint8_t* dst = out + row * k;
#pragma unroll
    for (int j = 0; j < MAXV; ++j) {
        const int i = (j * threads + thread) * VEC;
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

template <typename T, int VEC, int MAXV, bool WARP_ROWS>
int launch(const void* x, void* out, float* scale, int64_t rows, int64_t k, int activation, int threads,
           cudaStream_t stream) {
    const int64_t rows_per_block = WARP_ROWS ? threads / 32 : 1;
    const dim3 grid(static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block));
    const dim3 block(static_cast<unsigned>(threads));
    const auto* in = static_cast<const T*>(x);
    auto* codes = static_cast<uint8_t*>(out);
    if (activation == 1)
        return launch_kernel(quantize_fp8_kernel<T, VEC, MAXV, true, WARP_ROWS>, grid, block, 0, stream, in, codes,
                             scale, rows, static_cast<int>(k));
    return launch_kernel(quantize_fp8_kernel<T, VEC, MAXV, false, WARP_ROWS>, grid, block, 0, stream, in, codes,
                         scale, rows, static_cast<int>(k));
}

// Rows of up to 256 vectors go one per warp (8 warps a block); longer rows get a block of 256
// threads. Each thread holds at most 8 vectors (64 values) in registers. 256 rather than 128
// threads for the SwiGLU rows of the LocDiT's down projection (512 vectors): 17.5 -> 16.2 us at
// 1408 rows under ncu (run 18 of perf/RESULTS.md), the shorter per-thread chain of silu and
// divisions hiding more latency.
template <typename T, int VEC>
int launch_for(const void* x, void* out, float* scale, int64_t rows, int64_t k, int activation, cudaStream_t stream) {
    const int64_t vectors = k / VEC;
    if (vectors <= 32 * 8) {
        const int64_t per_lane = (vectors + 31) / 32;
        if (per_lane <= 1) return launch<T, VEC, 1, true>(x, out, scale, rows, k, activation, 256, stream);
        if (per_lane <= 2) return launch<T, VEC, 2, true>(x, out, scale, rows, k, activation, 256, stream);
        if (per_lane <= 4) return launch<T, VEC, 4, true>(x, out, scale, rows, k, activation, 256, stream);
        return launch<T, VEC, 8, true>(x, out, scale, rows, k, activation, 256, stream);
    }
    constexpr int threads = 256;
    const int64_t per_thread = (vectors + threads - 1) / threads;
    if (per_thread <= 2) return launch<T, VEC, 2, false>(x, out, scale, rows, k, activation, threads, stream);
    if (per_thread <= 4) return launch<T, VEC, 4, false>(x, out, scale, rows, k, activation, threads, stream);
    if (per_thread <= 8) return launch<T, VEC, 8, false>(x, out, scale, rows, k, activation, threads, stream);
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
