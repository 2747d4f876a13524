// Shared device helpers of the voxcpm kernels: dtype dispatch, 16-byte vector access, reductions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <utility>

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

// silu as PyTorch computes it (x / (1 + exp(-x)) in fp32, accurate expf), so rounding to the
// element type lands on the same value; every SwiGLU path (swiglu, skinny_gemm's epilogue,
// quantize_fp8's) uses this one so they agree bit for bit.
__device__ __forceinline__ float silu(float v) { return v / (1.f + expf(-v)); }

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

// Multiprocessors of the current device, 0 where the query fails.
__host__ inline int multiprocessors() {
    int count = 0;
    return current_device_attribute(cudaDevAttrMultiProcessorCount, &count) == 0 ? count : 0;
}

__host__ __forceinline__ int launch_status() { return static_cast<int>(cudaGetLastError()); }

// Programmatic dependent launch (Hopper and newer). A kernel started by launch() may begin while the
// kernel before it on the stream is still finishing, so a step made of many short kernels stops
// paying each one's launch and ramp-up in full. Every such kernel keeps two rules:
//  - pdl_wait() before it reads anything an earlier kernel wrote and before its first global write
//    (an earlier kernel may still be reading that memory); every block calls it, even one that
//    returns early, so "this kernel finished" keeps implying "everything before it finished";
//  - reads of memory no kernel writes (weights, tables) may come before the wait: that is where the
//    overlap pays, a GEMM streaming its weight while its predecessor drains.
// pdl_launch_dependents() lets the next kernel's blocks take SMs as this one's blocks leave.
// Without the launch attribute (older GPUs, VOXCPM_PDL=0) both are no-ops and order is plain
// stream order.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether launches on the current device use programmatic dependent launch: compute capability 9
// or newer, unless the environment sets VOXCPM_PDL=0 (for A/B timing). Cached per device.
__host__ inline bool pdl_enabled() {
    constexpr int kDevices = 64;
    static std::atomic<int> cached[kDevices];  // 0 unknown, 1 off, 2 on
    static const bool allowed = [] {
        const char* value = getenv("VOXCPM_PDL");
        return value == nullptr || value[0] != '0';
    }();
    if (!allowed) return false;
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) return false;
    int state = cached[device].load(std::memory_order_relaxed);
    if (state == 0) {
        int major = 0;
        state = current_device_attribute(cudaDevAttrComputeCapabilityMajor, &major) == cudaSuccess && major >= 9 ? 2 : 1;
        cached[device].store(state, std::memory_order_relaxed);
    }
    return state == 2;
}

// kernel<<<grid, block, shared_bytes, stream>>>(args...) with the programmatic dependent launch
// attribute where pdl_enabled(), in thread block clusters of `cluster` blocks unless that is 1x1x1
// (compute capability 9 or newer); returns the launch's cudaError_t as an int.
template <typename... Params, typename... Args>
__host__ int launch_kernel_in_clusters(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                                       dim3 cluster, cudaStream_t stream, Args&&... args) {
    cudaLaunchAttribute attributes[2];
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = shared_bytes;
    config.stream = stream;
    config.attrs = attributes;
    if (pdl_enabled()) {
        attributes[config.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attributes[config.numAttrs++].val.programmaticStreamSerializationAllowed = 1;
    }
    if (cluster.x * cluster.y * cluster.z > 1) {
        attributes[config.numAttrs].id = cudaLaunchAttributeClusterDimension;
        attributes[config.numAttrs].val.clusterDim.x = cluster.x;
        attributes[config.numAttrs].val.clusterDim.y = cluster.y;
        attributes[config.numAttrs++].val.clusterDim.z = cluster.z;
    }
    return static_cast<int>(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

template <typename... Params, typename... Args>
__host__ int launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes,
                           cudaStream_t stream, Args&&... args) {
    return launch_kernel_in_clusters(kernel, grid, block, shared_bytes, dim3(1, 1, 1), stream,
                                     std::forward<Args>(args)...);
}

}  // namespace voxcpm
