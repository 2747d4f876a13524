// Fused residual add + RMSNorm: one block per row, the row held in registers between the sum of
// squares and the scaling, so x is read once and written at most once.
#include "common.cuh"

namespace voxcpm {
namespace {

constexpr int kMaxThreads = 1024;

// Each thread owns up to MAXV vectors of VEC elements: vector j of thread t starts at element
// (j * blockDim.x + t) * VEC, so a warp's accesses are contiguous.
template <typename T, int VEC, int MAXV>
__global__ void __launch_bounds__(kMaxThreads) add_rmsnorm_kernel(T* __restrict__ x, const T* __restrict__ residual,
                                   const T* __restrict__ weight, T* __restrict__ out, int hidden,
                                   float eps, float residual_scale) {
    __shared__ float scratch[32];
    pdl_launch_dependents();
    pdl_wait();
    const int64_t base = static_cast<int64_t>(blockIdx.x) * hidden;
    float vals[MAXV][VEC];
    float sum_sq = 0.f;
#pragma unroll
    for (int j = 0; j < MAXV; ++j) {
        const int i = (j * blockDim.x + threadIdx.x) * VEC;
        if (i < hidden) {
            load_vec<T, VEC>(x + base + i, vals[j]);
            if (residual != nullptr) {
                float r[VEC];
                load_vec<T, VEC>(residual + base + i, r);
#pragma unroll
                for (int e = 0; e < VEC; ++e)
                    vals[j][e] = round_to<T>(vals[j][e] + round_to<T>(r[e] * residual_scale));
                store_vec<T, VEC>(x + base + i, vals[j]);
            }
#pragma unroll
            for (int e = 0; e < VEC; ++e) sum_sq += vals[j][e] * vals[j][e];
        }
    }
    const float total = block_sum(sum_sq, scratch);
    // 1/sqrt rather than rsqrtf: correctly rounded, like the reference's fp32 rsqrt on the CPU.
    const float inv_rms = 1.f / sqrtf(total / static_cast<float>(hidden) + eps);
#pragma unroll
    for (int j = 0; j < MAXV; ++j) {
        const int i = (j * blockDim.x + threadIdx.x) * VEC;
        if (i < hidden) {
            float w[VEC];
            load_vec<T, VEC>(weight + i, w);
            float y[VEC];
#pragma unroll
            for (int e = 0; e < VEC; ++e) y[e] = round_to<T>(vals[j][e] * inv_rms) * w[e];
            store_vec<T, VEC>(out + base + i, y);
        }
    }
}

template <typename T, int VEC, int MAXV>
int launch(void* x, const void* residual, const void* weight, void* out, int64_t rows,
           int64_t hidden, float eps, float residual_scale, cudaStream_t stream) {
    const int64_t vectors = hidden / VEC;
    const int64_t per_thread = (vectors + kMaxThreads - 1) / kMaxThreads;
    if (per_thread > MAXV) return VOXCPM_ERROR_INVALID_ARGUMENT;
    int64_t threads = (vectors + per_thread - 1) / per_thread;
    threads = ((threads + 31) / 32) * 32;
    return launch_kernel(add_rmsnorm_kernel<T, VEC, MAXV>, dim3(static_cast<unsigned>(rows)),
                         dim3(static_cast<unsigned>(threads)), 0, stream, static_cast<T*>(x),
                         static_cast<const T*>(residual), static_cast<const T*>(weight), static_cast<T*>(out),
                         static_cast<int>(hidden), eps, residual_scale);
}

}  // namespace
}  // namespace voxcpm

extern "C" int voxcpm_add_rmsnorm(void* x, const void* residual, const void* weight, void* out,
                                  int64_t rows, int64_t hidden, float eps, float residual_scale,
                                  int dtype, void* stream) {
    using namespace voxcpm;
    if (rows < 0 || rows > 0x7fffffff || hidden <= 0 || hidden > 16384) return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (x == nullptr || weight == nullptr || out == nullptr) return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (rows == 0) return 0;
    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        constexpr int kVec = 16 / sizeof(T);
        const bool vectorised = hidden % kVec == 0 && aligned16(x) && aligned16(weight) &&
                                aligned16(out) && (residual == nullptr || aligned16(residual));
        if (vectorised) return launch<T, kVec, 4>(x, residual, weight, out, rows, hidden, eps, residual_scale, s);
        return launch<T, 1, 16>(x, residual, weight, out, rows, hidden, eps, residual_scale, s);
    });
}
