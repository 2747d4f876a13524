// Snake activation math shared by the snake and snake_depthwise_conv kernels:
// snake(x) = x + sin(alpha x)^2 / (alpha + 1e-9), evaluated in fp32.
#pragma once

#include "common.cuh"

namespace voxcpm {

// sin(y)^2. fp32 outputs use the accurate sinf (agrees with PyTorch's fp32 sin to an ulp or two).
// bf16/fp16 outputs, whose rounding is 2^-9 / 2^-12 relative, use the fast hardware sine after
// reducing y by multiples of pi (sin^2 has period pi) into [-pi/2, pi/2], where its absolute error is
// below 2^-21: accurate sinf's range reduction would make these memory-bound kernels compute-bound.
template <typename T> __device__ __forceinline__ float sin_squared(float y) {
    constexpr float kPiHi = 3.14159274101257324e+00f;   // float(pi)
    constexpr float kPiLo = -8.74227765734758577e-08f;  // pi - kPiHi
    const float k = rintf(y * 0.318309886183790672f);
    const float r = fmaf(-k, kPiLo, fmaf(-k, kPiHi, y));
    const float s = __sinf(r);
    return s * s;
}
template <> __device__ __forceinline__ float sin_squared<float>(float y) {
    const float s = sinf(y);
    return s * s;
}

// 1 / (alpha + 1e-9) as the fp32 reference computes it (IEEE division: nvcc's default -prec-div).
__device__ __forceinline__ float inverse_alpha(float alpha) { return 1.f / (alpha + 1e-9f); }

template <typename T> __device__ __forceinline__ float snake(float x, float alpha, float inv_alpha) {
    return x + sin_squared<T>(alpha * x) * inv_alpha;
}

}  // namespace voxcpm
