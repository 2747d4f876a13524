// The RMSNorm row statistic, 1 / sqrt(mean(x^2) + eps). row_sum_squares sums a row with one warp in
// one fixed order: the kernels that use it (row_scale, short_attention from the norm's input) produce
// the same bits for the same row, so a LocDiT layer's numbers do not depend on which of them ran.
// block_row_sum_squares serves kernels with one row per block (rope_kv_write, swiglu).
#pragma once

#include "common.cuh"

namespace voxcpm {

// The warp's sum of squares over one row of `hidden` elements (every lane gets it): lane l adds
// elements l * VEC .. l * VEC + VEC - 1, then every 32 * VEC further, then the warp's butterfly.
template <typename T, int VEC>
__device__ __forceinline__ float row_sum_squares(const T* __restrict__ row, int hidden, int lane) {
    float sum_sq = 0.f;
    for (int i = lane * VEC; i < hidden; i += 32 * VEC) {
        float v[VEC];
        load_vec<T, VEC>(row + i, v);
#pragma unroll
        for (int e = 0; e < VEC; ++e) sum_sq += v[e] * v[e];
    }
    return warp_sum(sum_sq);
}

// The block's sum of squares over one row (every thread gets it), for a block that needs one row's
// statistic at once: thread i adds elements i * VEC.., then every blockDim.x * VEC further, so at
// the LM's 2048-wide rows every 16-byte load of a 128-thread block is in flight together. Its order
// differs from row_sum_squares' (the values agree to fp32 rounding). scratch: >= 32 floats.
template <typename T, int VEC>
__device__ __forceinline__ float block_row_sum_squares(const T* __restrict__ row, int hidden, float* scratch) {
    float sum_sq = 0.f;
#pragma unroll 4
    for (int i = threadIdx.x * VEC; i < hidden; i += blockDim.x * VEC) {
        float v[VEC];
        load_vec<T, VEC>(row + i, v);
#pragma unroll
        for (int e = 0; e < VEC; ++e) sum_sq += v[e] * v[e];
    }
    return block_sum(sum_sq, scratch);
}

// 1/sqrt rather than rsqrtf: correctly rounded, like add_rmsnorm and the reference on the CPU.
__device__ __forceinline__ float rms_scale(float sum_sq, int hidden, float eps) {
    return 1.f / sqrtf(sum_sq / static_cast<float>(hidden) + eps);
}

// One row's statistic by the whole block (every thread gets it; every thread must call it), the
// row read in 16-byte vectors where `vectors` (row_vectors' choice for it).
template <typename T>
__device__ __forceinline__ float block_row_scale(const T* __restrict__ row, int hidden, bool vectors, float eps) {
    __shared__ float scratch[32];
    const float sum_sq = vectors ? block_row_sum_squares<T, 16 / sizeof(T)>(row, hidden, scratch)
                                 : block_row_sum_squares<T, 1>(row, hidden, scratch);
    return rms_scale(sum_sq, hidden, eps);
}

// Whether a row of `hidden` elements at `x` is read in 16-byte vectors (VEC = 16 / sizeof(T)), the
// choice every caller makes the same way so that the summation order matches.
template <typename T>
__host__ inline bool row_vectors(const void* x, int64_t hidden) {
    return hidden % (16 / sizeof(T)) == 0 && aligned16(x);
}

}  // namespace voxcpm
