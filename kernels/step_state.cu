// The decode step's per-slot state: read at the start of a step, written at its end. Each is one
// launch, one block per batch row, where PyTorch ran ~9 gathers, casts and scatters on both ends of
// every step (with the stop decision and the host row's assembly), each a kernel of a few
// microseconds in the step's graph. Pure copies: the outputs are bit for bit the reference's.
#include <initializer_list>

#include "common.cuh"

namespace voxcpm {
namespace {

constexpr int kThreads = 128;

// n elements of T, VEC at a time (callers pick VEC so that every row start is VEC-aligned).
template <typename T, int VEC>
__device__ __forceinline__ void copy_row(T* __restrict__ dst, const T* __restrict__ src, int64_t n) {
    using V = Vec<T, VEC>;
    for (int64_t i = threadIdx.x; i < n / VEC; i += blockDim.x)
        reinterpret_cast<V*>(dst)[i] = reinterpret_cast<const V*>(src)[i];
}

template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads) step_gather_kernel(
    const int64_t* __restrict__ index, const T* __restrict__ ring, const T* __restrict__ lm_hidden,
    const T* __restrict__ residual_hidden, const T* __restrict__ prev_patch, const float* __restrict__ cfg_value,
    const int64_t* __restrict__ positions, T* __restrict__ noise, T* __restrict__ lm_out,
    T* __restrict__ residual_out, T* __restrict__ prev_out, float* __restrict__ cfg_out,
    int32_t* __restrict__ kernel_index, int64_t batch, int64_t slots, int64_t block, int64_t hidden,
    int patch, int feat) {
    pdl_launch_dependents();
    pdl_wait();
    const int64_t b = blockIdx.x;
    const int64_t slot = index[b];
    const int64_t ring_row = index[batch + b];
    // The engine only passes slots and ring rows it owns; anything else is left unread and unwritten.
    if (slot < 0 || slot > slots || ring_row < 0 || ring_row >= block) return;
    const int64_t patch_elems = static_cast<int64_t>(patch) * feat;
    copy_row<T, VEC>(lm_out + b * hidden, lm_hidden + slot * hidden, hidden);
    copy_row<T, VEC>(residual_out + b * hidden, residual_hidden + slot * hidden, hidden);
    copy_row<T, VEC>(prev_out + b * patch_elems, prev_patch + slot * patch_elems, patch_elems);
    // The ring holds [feat, patch] draws (the reference's layout); the step reads [patch, feat].
    const T* draw = ring + (slot * block + ring_row) * patch_elems;
    for (int i = threadIdx.x; i < patch_elems; i += blockDim.x)
        noise[b * patch_elems + i] = draw[(i % feat) * patch + i / feat];
    if (threadIdx.x == 0) {
        const auto position = static_cast<int32_t>(positions[slot]);
        cfg_out[b] = cfg_value[slot];
        kernel_index[b] = static_cast<int32_t>(slot);
        kernel_index[batch + b] = position;
        kernel_index[2 * batch + b] = position + 1;
    }
}

template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads) step_scatter_kernel(
    const int64_t* __restrict__ index, const int32_t* __restrict__ lengths, const T* __restrict__ next_lm,
    const T* __restrict__ next_residual, const T* __restrict__ patch_rows, const T* __restrict__ stop_logits,
    T* __restrict__ lm_hidden, T* __restrict__ residual_hidden, T* __restrict__ prev_patch,
    int64_t* __restrict__ positions, float* __restrict__ out, int64_t slots, int64_t hidden,
    int64_t patch_elems) {
    pdl_launch_dependents();
    pdl_wait();
    const int64_t b = blockIdx.x;
    float* row = out + b * (patch_elems + 1);
    const T* patch = patch_rows + b * patch_elems;
    for (int64_t i = threadIdx.x; i < patch_elems; i += blockDim.x) row[i] = to_float<T>(patch[i]);
    if (threadIdx.x == 0) {
        // torch.argmax over the two logits == 1: the first maximum, NaN counting as the maximum.
        const float no = to_float<T>(stop_logits[2 * b]), yes = to_float<T>(stop_logits[2 * b + 1]);
        row[patch_elems] = !isnan(no) && (isnan(yes) || yes > no) ? 1.f : 0.f;
    }
    const int64_t slot = index[b];
    if (slot < 0 || slot > slots) return;
    copy_row<T, VEC>(lm_hidden + slot * hidden, next_lm + b * hidden, hidden);
    copy_row<T, VEC>(residual_hidden + slot * hidden, next_residual + b * hidden, hidden);
    copy_row<T, VEC>(prev_patch + slot * patch_elems, patch, patch_elems);
    // Padding rows (the scratch slot, the last) keep position 0: they write cache row 0 every step.
    if (threadIdx.x == 0) positions[slot] = slot == slots ? 0 : lengths[b];
}

bool sizes_valid(int64_t batch, int64_t slots, int64_t hidden, int64_t patch, int64_t feat) {
    return batch >= 0 && batch <= 0x7fffffff && slots >= 0 && slots < 0x7fffffff && hidden > 0 &&
           hidden <= 65536 && patch > 0 && feat > 0 && patch * feat <= 65536;
}

// 16-byte copies when every row of both row sizes starts 16-byte aligned, else one element at a time.
template <typename T>
bool vectorisable(int64_t hidden, int64_t patch_elems, std::initializer_list<const void*> pointers) {
    constexpr int64_t kVec = 16 / sizeof(T);
    if (hidden % kVec != 0 || patch_elems % kVec != 0) return false;
    for (const void* p : pointers)
        if (!aligned16(p)) return false;
    return true;
}

}  // namespace
}  // namespace voxcpm

extern "C" int voxcpm_step_gather(const int64_t* index, const void* ring, const void* lm_hidden,
                                  const void* residual_hidden, const void* prev_patch, const float* cfg_value,
                                  const int64_t* positions, void* noise, void* lm_out, void* residual_out,
                                  void* prev_out, float* cfg_out, int32_t* kernel_index, int64_t batch,
                                  int64_t slots, int64_t block, int64_t hidden, int64_t patch, int64_t feat,
                                  int dtype, void* stream) {
    using namespace voxcpm;
    if (!sizes_valid(batch, slots, hidden, patch, feat) || block <= 0 || block > 0x7fffffff) return VOXCPM_ERROR_INVALID_ARGUMENT;
    const std::initializer_list<const void*> pointers = {index, ring, lm_hidden, residual_hidden, prev_patch, cfg_value,
                                                         positions, noise, lm_out, residual_out, prev_out, cfg_out,
                                                         kernel_index};
    for (const void* p : pointers)
        if (p == nullptr) return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (batch == 0) return 0;
    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        auto run = [&](auto kernel) {
            return launch_kernel(kernel, dim3(static_cast<unsigned>(batch)), dim3(kThreads), 0, s, index,
                                 static_cast<const T*>(ring), static_cast<const T*>(lm_hidden),
                                 static_cast<const T*>(residual_hidden), static_cast<const T*>(prev_patch), cfg_value,
                                 positions, static_cast<T*>(noise), static_cast<T*>(lm_out),
                                 static_cast<T*>(residual_out), static_cast<T*>(prev_out), cfg_out, kernel_index,
                                 batch, slots, block, hidden, static_cast<int>(patch), static_cast<int>(feat));
        };
        if (vectorisable<T>(hidden, patch * feat, {lm_hidden, residual_hidden, prev_patch, lm_out, residual_out, prev_out}))
            return run(step_gather_kernel<T, 16 / sizeof(T)>);
        return run(step_gather_kernel<T, 1>);
    });
}

extern "C" int voxcpm_step_scatter(const int64_t* index, const int32_t* lengths, const void* next_lm,
                                   const void* next_residual, const void* patch, const void* stop_logits,
                                   void* lm_hidden, void* residual_hidden, void* prev_patch, int64_t* positions,
                                   float* out, int64_t batch, int64_t slots, int64_t hidden, int64_t patch_size,
                                   int64_t feat, int dtype, void* stream) {
    using namespace voxcpm;
    if (!sizes_valid(batch, slots, hidden, patch_size, feat)) return VOXCPM_ERROR_INVALID_ARGUMENT;
    const std::initializer_list<const void*> pointers = {index, lengths, next_lm, next_residual, patch, stop_logits,
                                                         lm_hidden, residual_hidden, prev_patch, positions, out};
    for (const void* p : pointers)
        if (p == nullptr) return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (batch == 0) return 0;
    auto s = static_cast<cudaStream_t>(stream);
    const int64_t patch_elems = patch_size * feat;
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        auto run = [&](auto kernel) {
            return launch_kernel(kernel, dim3(static_cast<unsigned>(batch)), dim3(kThreads), 0, s, index, lengths,
                                 static_cast<const T*>(next_lm), static_cast<const T*>(next_residual),
                                 static_cast<const T*>(patch), static_cast<const T*>(stop_logits),
                                 static_cast<T*>(lm_hidden), static_cast<T*>(residual_hidden),
                                 static_cast<T*>(prev_patch), positions, out, slots, hidden, patch_elems);
        };
        if (vectorisable<T>(hidden, patch_elems, {next_lm, next_residual, patch, lm_hidden, residual_hidden, prev_patch}))
            return run(step_scatter_kernel<T, 16 / sizeof(T)>);
        return run(step_scatter_kernel<T, 1>);
    });
}
