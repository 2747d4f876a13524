// Rotary embedding of q and k fused with the KV-cache write: one block per token rotates all its
// q heads, writes rotated k and plain v into the token's slot at the token's position. With
// norm_input (an LM layer whose input RMSNorm weight is folded into its qkv weight) the block first
// computes its token's norm statistic from the norm's input row and scales q, k and v by it.
#include "common.cuh"
#include "rope_rotation.cuh"
#include "row_statistic.cuh"

namespace voxcpm {
namespace {

constexpr int kThreads = 128;

struct RopeArgs {
    const void* q;
    int64_t q_token_stride, q_head_stride;
    const void* k;
    int64_t k_token_stride, k_head_stride;
    const void* v;
    int64_t v_token_stride, v_head_stride;
    void* q_out;
    const float* cos;
    const float* sin;
    int64_t table_len;
    const int32_t* positions;
    const int32_t* slot_ids;
    void* k_cache;
    void* v_cache;
    int64_t cache_slot_stride, cache_head_stride, cache_pos_stride;
    int64_t num_slots, max_len;
    int q_heads, kv_heads, head_dim;
    const void* norm_input;  // [tokens, hidden] contiguous, or NULL: no scaling
    int hidden;
    int norm_vectors;  // norm_input's rows are read in 16-byte vectors
    float eps;
};

// The token's norm statistic from a.norm_input (1 without it). After pdl_wait(), unlike
// short_attention's: below 33 rows the qkv GEMM before this kernel can be skinny_gemm, which lets its
// dependents start before the kernel that wrote the norm's input has finished.
template <typename T>
__device__ __forceinline__ float token_scale(const RopeArgs& a, int64_t token) {
    if (a.norm_input == nullptr) return 1.f;
    return block_row_scale(static_cast<const T*>(a.norm_input) + token * a.hidden, a.hidden, a.norm_vectors, a.eps);
}

template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads) rope_kv_write_kernel(RopeArgs a) {
    pdl_launch_dependents();
    pdl_wait();
    const int64_t token = blockIdx.x;
    const float factor = token_scale<T>(a, token);
    const int32_t pos = a.positions[token];
    const int32_t slot = a.slot_ids[token];
    const bool write_cache = slot >= 0 && slot < a.num_slots && pos >= 0 && pos < a.max_len;
    const int64_t table_pos = pos < 0 ? 0 : (pos >= a.table_len ? a.table_len - 1 : pos);
    const float* cos_row = a.cos == nullptr ? nullptr : a.cos + table_pos * a.head_dim;
    const float* sin_row = a.sin == nullptr ? nullptr : a.sin + table_pos * a.head_dim;
    const int half = a.head_dim / 2;
    const int pair_vectors = half / VEC;
    const int64_t cache_base = write_cache ? slot * a.cache_slot_stride + pos * a.cache_pos_stride : 0;

    const T* q = static_cast<const T*>(a.q) + token * a.q_token_stride;
    T* q_out = static_cast<T*>(a.q_out) + token * a.q_heads * a.head_dim;
    for (int item = threadIdx.x; item < a.q_heads * pair_vectors; item += blockDim.x) {
        const int head = item / pair_vectors;
        const int d = (item - head * pair_vectors) * VEC;
        rotate_scaled<T, VEC>(q + head * a.q_head_stride, q_out + head * a.head_dim, cos_row, sin_row, d, half, factor);
    }
    if (!write_cache) return;

    const T* k = static_cast<const T*>(a.k) + token * a.k_token_stride;
    T* k_cache = static_cast<T*>(a.k_cache) + cache_base;
    for (int item = threadIdx.x; item < a.kv_heads * pair_vectors; item += blockDim.x) {
        const int head = item / pair_vectors;
        const int d = (item - head * pair_vectors) * VEC;
        rotate_scaled<T, VEC>(k + head * a.k_head_stride, k_cache + head * a.cache_head_stride, cos_row, sin_row, d, half,
                       factor);
    }
    const T* v = static_cast<const T*>(a.v) + token * a.v_token_stride;
    T* v_cache = static_cast<T*>(a.v_cache) + cache_base;
    const int vectors = a.head_dim / VEC;
    for (int item = threadIdx.x; item < a.kv_heads * vectors; item += blockDim.x) {
        const int head = item / vectors;
        const int d = (item - head * vectors) * VEC;
        if (a.norm_input == nullptr) {
            *reinterpret_cast<Vec<T, VEC>*>(v_cache + head * a.cache_head_stride + d) =
                *reinterpret_cast<const Vec<T, VEC>*>(v + head * a.v_head_stride + d);
        } else {
            float x[VEC];
            load_vec<T, VEC>(v + head * a.v_head_stride + d, x);
#pragma unroll
            for (int e = 0; e < VEC; ++e) x[e] *= factor;
            store_vec<T, VEC>(v_cache + head * a.cache_head_stride + d, x);
        }
    }
}

template <typename T> bool vector_path_ok(const RopeArgs& a, int vec) {
    const int64_t strides[] = {a.q_token_stride, a.q_head_stride, a.k_token_stride, a.k_head_stride,
                               a.v_token_stride, a.v_head_stride, a.cache_slot_stride,
                               a.cache_head_stride, a.cache_pos_stride};
    for (int64_t s : strides)
        if (s % vec != 0) return false;
    return (a.head_dim / 2) % vec == 0 && aligned16(a.q) && aligned16(a.k) && aligned16(a.v) &&
           aligned16(a.q_out) && aligned16(a.k_cache) && aligned16(a.v_cache);
}

}  // namespace
}  // namespace voxcpm

extern "C" int voxcpm_rope_kv_write(const void* q, int64_t q_token_stride, int64_t q_head_stride,
                                    const void* k, int64_t k_token_stride, int64_t k_head_stride,
                                    const void* v, int64_t v_token_stride, int64_t v_head_stride,
                                    void* q_out, const float* cos, const float* sin,
                                    int64_t table_len, const int32_t* positions,
                                    const int32_t* slot_ids, void* k_cache, void* v_cache,
                                    int64_t cache_slot_stride, int64_t cache_head_stride,
                                    int64_t cache_pos_stride, int64_t num_slots, int64_t max_len,
                                    int64_t tokens, int q_heads, int kv_heads, int head_dim,
                                    const void* norm_input, int64_t hidden, float eps, int dtype,
                                    void* stream) {
    using namespace voxcpm;
    if (tokens < 0 || tokens > 0x7fffffff || q_heads <= 0 || kv_heads <= 0 || head_dim <= 0 ||
        head_dim % 2 != 0 || head_dim > 256 || num_slots < 0 || max_len < 0)
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if ((cos == nullptr) != (sin == nullptr) || (cos != nullptr && table_len <= 0))
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (q == nullptr || k == nullptr || v == nullptr || q_out == nullptr || positions == nullptr ||
        slot_ids == nullptr || k_cache == nullptr || v_cache == nullptr)
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (norm_input != nullptr && (hidden < 1 || hidden > 16384 || eps <= 0.f)) return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (tokens == 0) return 0;
    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        constexpr int kVec = 16 / sizeof(T);
        const RopeArgs args{q, q_token_stride, q_head_stride, k, k_token_stride, k_head_stride, v,
                            v_token_stride, v_head_stride, q_out, cos, sin, table_len, positions,
                            slot_ids, k_cache, v_cache, cache_slot_stride, cache_head_stride,
                            cache_pos_stride, num_slots, max_len, q_heads, kv_heads, head_dim,
                            norm_input, static_cast<int>(hidden),
                            norm_input != nullptr && row_vectors<T>(norm_input, hidden), eps};
        const dim3 grid(static_cast<unsigned>(tokens));
        if (vector_path_ok<T>(args, kVec)) return launch_kernel(rope_kv_write_kernel<T, kVec>, grid, dim3(kThreads), 0, s, args);
        return launch_kernel(rope_kv_write_kernel<T, 1>, grid, dim3(kThreads), 0, s, args);
    });
}
