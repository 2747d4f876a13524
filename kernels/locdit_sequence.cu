// The LocDiT's input sequence for both guidance branches, built in one pass.
//
// Each Euler step of VoxCPM2's flow matching feeds the LocDiT [2 * batch, L, hidden] rows: per
// branch and stream, its mu tokens, the step's time token, the projected condition patch and the
// projected noisy patch. Only mu differs between the branches. torch.cat over the broadcast views
// of the shared parts takes its strided path, ~8.7 us at 64 streams on the H200 for ~4 MB moved
// (perf/results/h200-2026-12-04-run63, 10 calls a step); as a plain copy it is bandwidth-bound.
// One block per output row, one 16-byte vector per thread where the rows allow it.
#include "common.cuh"

namespace voxcpm {
namespace {

template <typename T, int VEC>
__global__ void locdit_sequence_kernel(const T* __restrict__ mu_pair, const T* __restrict__ time,
                                       const T* __restrict__ cond, const T* __restrict__ x, T* __restrict__ out,
                                       int batch, int mu_tokens, int cond_tokens, int patch, int hidden) {
    pdl_wait();  // every input comes from the kernels before this one
    pdl_launch_dependents();
    const int length = mu_tokens + 1 + cond_tokens + patch;
    const int64_t row = blockIdx.x;  // (branch * batch + stream) * length + token
    const int token = static_cast<int>(row % length);
    const int64_t sequence = row / length;
    const int64_t stream = sequence % batch;
    const T* src;
    if (token < mu_tokens) {
        src = mu_pair + (sequence * mu_tokens + token) * hidden;
    } else if (token == mu_tokens) {
        src = time;
    } else if (token < mu_tokens + 1 + cond_tokens) {
        src = cond + (stream * cond_tokens + (token - mu_tokens - 1)) * hidden;
    } else {
        src = x + (stream * patch + (token - mu_tokens - 1 - cond_tokens)) * hidden;
    }
    T* dst = out + row * hidden;
    for (int i = threadIdx.x * VEC; i < hidden; i += blockDim.x * VEC) {
        if constexpr (VEC == 1) {
            dst[i] = src[i];
        } else {
            *reinterpret_cast<uint4*>(dst + i) = *reinterpret_cast<const uint4*>(src + i);
        }
    }
}

template <typename T, int VEC>
int launch(const void* mu_pair, const void* time, const void* cond, const void* x, void* out, int64_t rows,
           int batch, int mu_tokens, int cond_tokens, int patch, int hidden, cudaStream_t stream) {
    const int threads = std::min(256, std::max(32, (hidden / VEC + 31) / 32 * 32));
    return launch_kernel(locdit_sequence_kernel<T, VEC>, dim3(static_cast<unsigned>(rows)), dim3(threads), 0, stream,
                         static_cast<const T*>(mu_pair), static_cast<const T*>(time), static_cast<const T*>(cond),
                         static_cast<const T*>(x), static_cast<T*>(out), batch, mu_tokens, cond_tokens, patch, hidden);
}

}  // namespace
}  // namespace voxcpm

extern "C" int voxcpm_locdit_sequence(const void* mu_pair, const void* time, const void* cond, const void* x,
                                      void* out, int64_t batch, int64_t mu_tokens, int64_t cond_tokens, int64_t patch,
                                      int64_t hidden, int dtype, void* stream) {
    using namespace voxcpm;
    if (batch < 0 || batch > (1 << 20) || mu_tokens < 0 || mu_tokens > 64 || cond_tokens < 0 || cond_tokens > 64 ||
        patch <= 0 || patch > 64 || hidden <= 0 || hidden > 65536)
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (batch == 0) return 0;
    if (time == nullptr || x == nullptr || out == nullptr || (mu_tokens > 0 && mu_pair == nullptr) ||
        (cond_tokens > 0 && cond == nullptr))
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    const int64_t rows = 2 * batch * (mu_tokens + 1 + cond_tokens + patch);
    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        constexpr int kVec = 16 / sizeof(T);
        const bool vectors = hidden % kVec == 0 && aligned16(out) && aligned16(time) && aligned16(x) &&
                             (mu_tokens == 0 || aligned16(mu_pair)) && (cond_tokens == 0 || aligned16(cond));
        auto run = vectors ? launch<T, kVec> : launch<T, 1>;
        return run(mu_pair, time, cond, x, out, rows, static_cast<int>(batch), static_cast<int>(mu_tokens),
                   static_cast<int>(cond_tokens), static_cast<int>(patch), static_cast<int>(hidden), s);
    });
}
