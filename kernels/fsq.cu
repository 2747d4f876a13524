// Finite scalar quantisation (tanh, scale, round, unscale) as one elementwise pass.
#include "common.cuh"

namespace voxcpm {
namespace {

// Every intermediate is rounded to T as the reference's low-precision expression is; rounding
// before rintf decides which level a value near a half-step lands on.
template <typename T> __device__ __forceinline__ float quantise(float h, float scale) {
    const float t = round_to<T>(tanhf(h));
    const float scaled = round_to<T>(t * scale);
    return rintf(scaled) / scale;
}

template <typename T, int VEC>
__global__ void fsq_kernel(const T* h, T* out, int64_t vectors, float scale) {
    pdl_launch_dependents();
    pdl_wait();
    for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < vectors;
         idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        float v[VEC];
        load_vec<T, VEC>(h + idx * VEC, v);
#pragma unroll
        for (int e = 0; e < VEC; ++e) v[e] = quantise<T>(v[e], scale);
        store_vec<T, VEC>(out + idx * VEC, v);
    }
}

template <typename T, int VEC>
int launch(const void* h, void* out, int64_t n, float scale, cudaStream_t stream) {
    constexpr int kThreads = 256;
    const int64_t vectors = n / VEC;
    const int64_t blocks = std::min<int64_t>((vectors + kThreads - 1) / kThreads, 132 * 16);
    return launch_kernel(fsq_kernel<T, VEC>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream,
                         static_cast<const T*>(h), static_cast<T*>(out), vectors, scale);
}

}  // namespace
}  // namespace voxcpm

extern "C" int voxcpm_fsq(const void* h, void* out, int64_t n, float scale, int dtype, void* stream) {
    using namespace voxcpm;
    if (n < 0 || h == nullptr || out == nullptr || !(scale > 0.f)) return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (n == 0) return 0;
    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        constexpr int kVec = 16 / sizeof(T);
        if (n % kVec == 0 && aligned16(h) && aligned16(out)) return launch<T, kVec>(h, out, n, scale, s);
        return launch<T, 1>(h, out, n, scale, s);
    });
}
