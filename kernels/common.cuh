// Shared device helpers of the voxcpm kernels: dtype dispatch, 16-byte vector access, reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <algorithm>

#include "voxcpm_kernels.h"

namespace voxcpm {

template <typename T> __device__ __forceinline__ float to_float(T v);
template <> __device__ __forceinline__ float to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) {
    return __bfloat162float(v);
}

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

// Value of v after a round trip through T: how PyTorch rounds each intermediate of a low-precision
// expression, reproduced where bit-level parity with the reference matters.
template <typename T> __device__ __forceinline__ float round_to(float v) {
    return to_float<T>(from_float<T>(v));
}

// VEC elements of T moved as one access (16 bytes when VEC * sizeof(T) == 16).
template <typename T, int VEC> struct alignas(sizeof(T) * VEC) Vec {
    T v[VEC];
};

template <typename T, int VEC>
__device__ __forceinline__ void load_vec(const T* p, float (&out)[VEC]) {
    Vec<T, VEC> tmp = *reinterpret_cast<const Vec<T, VEC>*>(p);
#pragma unroll
    for (int i = 0; i < VEC; ++i) out[i] = to_float<T>(tmp.v[i]);
}

template <typename T, int VEC>
__device__ __forceinline__ void store_vec(T* p, const float (&in)[VEC]) {
    Vec<T, VEC> tmp;
#pragma unroll
    for (int i = 0; i < VEC; ++i) tmp.v[i] = from_float<T>(in[i]);
    *reinterpret_cast<Vec<T, VEC>*>(p) = tmp;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

// Sum over the whole block; every thread gets the result. `scratch` holds >= 32 floats and may be
// reused once this returns.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int warps = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads();  // scratch may still be read by a previous call
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0.f;
    return warp_sum(v);
}

__host__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// Calls fn.template operator()<T>() with T the element type named by a voxcpm_dtype code.
template <typename Fn> __host__ int dispatch_dtype(int dtype, Fn&& fn) {
    switch (dtype) {
        case VOXCPM_FLOAT32: return fn(float{});
        case VOXCPM_FLOAT16: return fn(__half{});
        case VOXCPM_BFLOAT16: return fn(__nv_bfloat16{});
        default: return VOXCPM_ERROR_INVALID_ARGUMENT;
    }
}

// An attribute of the current device (callers make the tensors' device current), as a cudaError_t.
__host__ inline int current_device_attribute(cudaDeviceAttr attribute, int* value) {
    int device = 0;
    cudaError_t error = cudaGetDevice(&device);
    if (error == cudaSuccess) error = cudaDeviceGetAttribute(value, attribute, device);
    return static_cast<int>(error);
}

__host__ __forceinline__ int launch_status() { return static_cast<int>(cudaGetLastError()); }

}  // namespace voxcpm
