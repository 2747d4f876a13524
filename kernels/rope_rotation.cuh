// Rotate-half RoPE as every kernel applies it (rope_kv_write, short_attention, the decode attention
// kernel with rope_kv_write folded in): one fp32 expression, each product rounded on its own (no
// fused multiply-add), the reference's expression bit for bit, so the kernels agree with each other
// on the rotated q and k they write or use.
#pragma once

#include "common.cuh"

namespace voxcpm {

// (x1, x2) at dims (d, d + half) rotated by the table rows' (c1, s1) at d and (c2, s2) at d + half.
__device__ __forceinline__ void rope_pair(float& x1, float& x2, float c1, float s1, float c2, float s2) {
    const float y1 = __fadd_rn(__fmul_rn(x1, c1), __fmul_rn(-x2, s1));
    const float y2 = __fadd_rn(__fmul_rn(x2, c2), __fmul_rn(x1, s2));
    x1 = y1;
    x2 = y2;
}

// VEC pairs of a row in global memory, dims (d + e, d + e + half), each value first multiplied by
// `factor` in fp32 (a row's norm statistic, or 1), rotated by the table rows (none when cos_row is
// NULL), and stored to dst's same dims, rounded once to T.
template <typename T, int VEC>
__device__ __forceinline__ void rotate_scaled(const T* src, T* dst, const float* cos_row, const float* sin_row, int d,
                                              int half, float factor) {
    float x1[VEC], x2[VEC], c1[VEC], s1[VEC], c2[VEC], s2[VEC];
    load_vec<T, VEC>(src + d, x1);
    load_vec<T, VEC>(src + d + half, x2);
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
        x1[e] *= factor;
        x2[e] *= factor;
    }
    if (cos_row != nullptr) {
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
            c1[e] = cos_row[d + e];
            s1[e] = sin_row[d + e];
            c2[e] = cos_row[d + half + e];
            s2[e] = sin_row[d + half + e];
        }
#pragma unroll
        for (int e = 0; e < VEC; ++e) rope_pair(x1[e], x2[e], c1[e], s1[e], c2[e], s2[e]);
    }
    store_vec<T, VEC>(dst + d, x1);
    store_vec<T, VEC>(dst + d + half, x2);
}

}  // namespace voxcpm
