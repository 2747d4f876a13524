// CFG-zero-star guidance + Euler update of the flow-matching solver: one block per stream, both
// reductions and the update in one launch instead of about ten elementwise/reduction kernels.
#include "common.cuh"

namespace voxcpm {
namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads) cfg_euler_kernel(T* __restrict__ x, const T* __restrict__ v_cond,
                                                             const T* __restrict__ v_uncond,
                                                             const float* __restrict__ cfg,
                                                             const float* __restrict__ dt, int64_t elems) {
    __shared__ float scratch[32];
    pdl_launch_dependents();
    pdl_wait();
    const int64_t base = static_cast<int64_t>(blockIdx.x) * elems;
    float dot = 0.f, sq = 0.f;
    for (int64_t i = threadIdx.x; i < elems; i += blockDim.x) {
        const float c = to_float<T>(v_cond[base + i]);
        const float u = to_float<T>(v_uncond[base + i]);
        dot += c * u;
        sq += u * u;
    }
    dot = block_sum(dot, scratch);
    sq = block_sum(sq, scratch);
    const float st = dot / (sq + 1e-8f);
    const float guidance = cfg[blockIdx.x];
    const float step = dt[blockIdx.x];
    for (int64_t i = threadIdx.x; i < elems; i += blockDim.x) {
        const float c = to_float<T>(v_cond[base + i]);
        const float u = to_float<T>(v_uncond[base + i]) * st;
        const float v = u + guidance * (c - u);
        x[base + i] = from_float<T>(to_float<T>(x[base + i]) - step * v);
    }
}

}  // namespace
}  // namespace voxcpm

extern "C" int voxcpm_cfg_euler(void* x, const void* v_cond, const void* v_uncond, const float* cfg,
                                const float* dt, int64_t batch, int64_t elems, int dtype, void* stream) {
    using namespace voxcpm;
    if (batch < 0 || batch > 0x7fffffff || elems <= 0) return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (x == nullptr || v_cond == nullptr || v_uncond == nullptr || cfg == nullptr || dt == nullptr)
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (batch == 0) return 0;
    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        return launch_kernel(cfg_euler_kernel<T>, dim3(static_cast<unsigned>(batch)), dim3(kThreads), 0, s,
                             static_cast<T*>(x), static_cast<const T*>(v_cond), static_cast<const T*>(v_uncond), cfg,
                             dt, elems);
    });
}
