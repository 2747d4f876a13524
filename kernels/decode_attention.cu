// Decode attention (one query token per stream) with grouped-query heads over ragged per-slot
// lengths. A block serves GT query heads that share one KV head, so each key and value row is read
// once for the whole group; a stream's live range is cut into num_splits equal pieces (split-K) so
// a small batch still spreads over the GPU, and the grid shape depends only on the batch, never on
// the lengths, which keeps it capturable in a CUDA graph.
#include <math.h>

#include "common.cuh"

namespace voxcpm {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTile = 128;  // keys whose logits are held in shared memory at a time
constexpr int kMinPiece = 32;  // fewer keys per split cost more in the combine than they save
constexpr float kLog2e = 1.4426950408889634f;

struct AttnArgs {
    const void* q;
    const void* k_cache;
    const void* v_cache;
    int64_t slot_stride, head_stride, pos_stride;
    int64_t num_slots, max_len;
    const int32_t* slot_ids;
    const int32_t* lengths;
    void* out;
    float* ws_acc;  // [batch, q_heads, num_splits, D] unnormalised partial outputs
    float* ws_max;  // [batch, q_heads, num_splits] running max of log2-scaled logits
    float* ws_sum;  // [batch, q_heads, num_splits] softmax denominators relative to ws_max
    int q_heads, kv_heads, num_splits;
    float scale_log2;  // softmax scale folded with log2(e): exp2 replaces exp
};

template <typename T, int D, int GT>
__global__ void __launch_bounds__(kThreads) decode_attention_kernel(AttnArgs a) {
    constexpr int ELEMS = 16 / sizeof(T);  // elements per 16-byte access
    constexpr int LPK = D / ELEMS;         // lanes sharing one key row
    constexpr int KPW = 32 / LPK;          // key rows a warp covers per access
    constexpr int NR = kThreads / LPK;     // value rows the block covers per access
    static_assert(LPK <= 32 && 32 % LPK == 0, "head_dim must span at most one warp");

    __shared__ float logits[GT][kTile];
    __shared__ float reduce[kWarps][GT][D];
    __shared__ float run_max[GT], run_sum[GT], rescale[GT];

    const int split = blockIdx.x;
    const int groups_per_kv = (a.q_heads / a.kv_heads) / GT;
    const int kv_head = blockIdx.y / groups_per_kv;
    const int q_head0 = kv_head * (a.q_heads / a.kv_heads) + (blockIdx.y % groups_per_kv) * GT;
    const int64_t b = blockIdx.z;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int c = threadIdx.x % LPK;  // which 16-byte column of a row this thread handles

    const int32_t slot = a.slot_ids[b];
    int64_t len = a.lengths[b];
    if (slot < 0 || slot >= a.num_slots || len < 0) len = 0;
    if (len > a.max_len) len = a.max_len;
    int64_t piece = (len + a.num_splits - 1) / a.num_splits;
    if (piece < kMinPiece) piece = kMinPiece;
    const int64_t start = split * piece;
    const int64_t end = start + piece < len ? start + piece : len;

    const T* k_base = static_cast<const T*>(a.k_cache) + slot * a.slot_stride + kv_head * a.head_stride;
    const T* v_base = static_cast<const T*>(a.v_cache) + slot * a.slot_stride + kv_head * a.head_stride;

    float q[GT][ELEMS];
#pragma unroll
    for (int g = 0; g < GT; ++g) {
        load_vec<T, ELEMS>(static_cast<const T*>(a.q) + (b * a.q_heads + q_head0 + g) * D + c * ELEMS, q[g]);
#pragma unroll
        for (int e = 0; e < ELEMS; ++e) q[g][e] *= a.scale_log2;
    }
    float acc[GT][ELEMS];
#pragma unroll
    for (int g = 0; g < GT; ++g)
#pragma unroll
        for (int e = 0; e < ELEMS; ++e) acc[g][e] = 0.f;
    if (threadIdx.x < GT) {
        run_max[threadIdx.x] = -INFINITY;
        run_sum[threadIdx.x] = 0.f;
    }
    __syncthreads();

    for (int64_t tile = start; tile < end; tile += kTile) {
        const int n = static_cast<int>(end - tile < kTile ? end - tile : kTile);

        // Logits: LPK lanes share a key row; t0 is warp-uniform so every lane takes part in the
        // shuffles even when its own row is past the end.
#pragma unroll 2
        for (int t0 = warp * KPW; t0 < n; t0 += kWarps * KPW) {
            const int t = t0 + lane / LPK;
            float kv[ELEMS];
            if (t < n) {
                load_vec<T, ELEMS>(k_base + (tile + t) * a.pos_stride + c * ELEMS, kv);
            } else {
#pragma unroll
                for (int e = 0; e < ELEMS; ++e) kv[e] = 0.f;
            }
#pragma unroll
            for (int g = 0; g < GT; ++g) {
                float dot = 0.f;
#pragma unroll
                for (int e = 0; e < ELEMS; ++e) dot += q[g][e] * kv[e];
#pragma unroll
                for (int off = LPK / 2; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
                if (c == 0 && t < n) logits[g][t] = dot;
            }
        }
        __syncthreads();

        // Online softmax update, one warp per head.
        for (int g = warp; g < GT; g += kWarps) {
            float mx = -INFINITY;
            for (int t = lane; t < n; t += 32) mx = fmaxf(mx, logits[g][t]);
            mx = warp_max(mx);
            const float new_max = fmaxf(run_max[g], mx);
            float sum = 0.f;
            for (int t = lane; t < n; t += 32) {
                const float p = exp2f(logits[g][t] - new_max);
                logits[g][t] = p;
                sum += p;
            }
            sum = warp_sum(sum);
            if (lane == 0) {
                const float alpha = exp2f(run_max[g] - new_max);
                rescale[g] = alpha;
                run_sum[g] = run_sum[g] * alpha + sum;
                run_max[g] = new_max;
            }
        }
        __syncthreads();

        // Weighted values: thread row r walks rows r, r + NR, ...
#pragma unroll
        for (int g = 0; g < GT; ++g) {
            const float alpha = rescale[g];
#pragma unroll
            for (int e = 0; e < ELEMS; ++e) acc[g][e] *= alpha;
        }
#pragma unroll 4
        for (int t = threadIdx.x / LPK; t < n; t += NR) {
            float vv[ELEMS];
            load_vec<T, ELEMS>(v_base + (tile + t) * a.pos_stride + c * ELEMS, vv);
#pragma unroll
            for (int g = 0; g < GT; ++g) {
                const float p = logits[g][t];
#pragma unroll
                for (int e = 0; e < ELEMS; ++e) acc[g][e] += p * vv[e];
            }
        }
        __syncthreads();  // logits are overwritten by the next tile
    }

    // Sum the rows' partial outputs: first across the rows sharing a warp, then across warps.
#pragma unroll
    for (int g = 0; g < GT; ++g)
#pragma unroll
        for (int e = 0; e < ELEMS; ++e)
#pragma unroll
            for (int off = LPK; off < 32; off <<= 1) acc[g][e] += __shfl_xor_sync(0xffffffffu, acc[g][e], off);
    if (lane < LPK) {
#pragma unroll
        for (int g = 0; g < GT; ++g)
#pragma unroll
            for (int e = 0; e < ELEMS; ++e) reduce[warp][g][c * ELEMS + e] = acc[g][e];
    }
    __syncthreads();

    for (int i = threadIdx.x; i < GT * D; i += kThreads) {
        const int g = i / D;
        const int d = i - g * D;
        float total = 0.f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) total += reduce[w][g][d];
        const int64_t head = b * a.q_heads + q_head0 + g;
        if (a.num_splits == 1) {
            const float denom = run_sum[g];
            static_cast<T*>(a.out)[head * D + d] = from_float<T>(denom > 0.f ? total / denom : 0.f);
        } else {
            a.ws_acc[(head * a.num_splits + split) * D + d] = total;
            if (d == 0) {
                a.ws_max[head * a.num_splits + split] = run_max[g];
                a.ws_sum[head * a.num_splits + split] = run_sum[g];
            }
        }
    }
}

// Combines the splits of one (stream, query head): rescale each partial to the common maximum.
template <typename T, int D>
__global__ void __launch_bounds__(D) combine_splits_kernel(const float* __restrict__ ws_acc,
                                                           const float* __restrict__ ws_max,
                                                           const float* __restrict__ ws_sum, T* __restrict__ out,
                                                           int num_splits) {
    const int64_t head = blockIdx.x;
    const int d = threadIdx.x;
    const float* m = ws_max + head * num_splits;
    const float* l = ws_sum + head * num_splits;
    float global_max = -INFINITY;
    for (int s = 0; s < num_splits; ++s) global_max = fmaxf(global_max, m[s]);
    float denom = 0.f, total = 0.f;
    if (global_max != -INFINITY) {
        for (int s = 0; s < num_splits; ++s) {
            if (l[s] <= 0.f) continue;
            const float w = exp2f(m[s] - global_max);
            denom += l[s] * w;
            total += ws_acc[(head * num_splits + s) * D + d] * w;
        }
    }
    out[head * D + d] = from_float<T>(denom > 0.f ? total / denom : 0.f);
}

template <typename T, int D, int GT>
int launch(const AttnArgs& a, int64_t batch, cudaStream_t stream) {
    const dim3 grid(a.num_splits, a.kv_heads * ((a.q_heads / a.kv_heads) / GT), static_cast<unsigned>(batch));
    decode_attention_kernel<T, D, GT><<<grid, kThreads, 0, stream>>>(a);
    int err = launch_status();
    if (err != 0 || a.num_splits == 1) return err;
    combine_splits_kernel<T, D><<<static_cast<unsigned>(batch * a.q_heads), D, 0, stream>>>(
        a.ws_acc, a.ws_max, a.ws_sum, static_cast<T*>(a.out), a.num_splits);
    return launch_status();
}

// The largest heads-per-block (8, 4, 2, 1) dividing the group size: 8 keeps the accumulators of a
// thread within registers.
template <typename T, int D>
int launch_for_group(const AttnArgs& a, int64_t batch, cudaStream_t stream) {
    const int group = a.q_heads / a.kv_heads;
    if (group % 8 == 0) return launch<T, D, 8>(a, batch, stream);
    if (group % 4 == 0) return launch<T, D, 4>(a, batch, stream);
    if (group % 2 == 0) return launch<T, D, 2>(a, batch, stream);
    return launch<T, D, 1>(a, batch, stream);
}

}  // namespace
}  // namespace voxcpm

extern "C" size_t voxcpm_decode_attention_workspace_bytes(int64_t batch, int q_heads, int head_dim,
                                                          int num_splits) {
    if (num_splits <= 1 || batch <= 0 || q_heads <= 0 || head_dim <= 0) return 0;
    const size_t heads = static_cast<size_t>(batch) * q_heads * num_splits;
    return heads * (static_cast<size_t>(head_dim) + 2) * sizeof(float);
}

extern "C" int voxcpm_decode_attention(const void* q, const void* k_cache, const void* v_cache,
                                       int64_t cache_slot_stride, int64_t cache_head_stride,
                                       int64_t cache_pos_stride, int64_t num_slots, int64_t max_len,
                                       const int32_t* slot_ids, const int32_t* lengths, void* out,
                                       void* workspace, size_t workspace_bytes, int64_t batch,
                                       int q_heads, int kv_heads, int head_dim, int num_splits,
                                       float scale, int dtype, void* stream) {
    using namespace voxcpm;
    if (batch < 0 || batch > 65535 || q_heads <= 0 || kv_heads <= 0 || q_heads % kv_heads != 0 ||
        (head_dim != 64 && head_dim != 128) || num_splits < 1 || num_splits > 256 || num_slots < 0 ||
        max_len < 0)
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (q == nullptr || k_cache == nullptr || v_cache == nullptr || slot_ids == nullptr ||
        lengths == nullptr || out == nullptr)
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    const size_t needed = voxcpm_decode_attention_workspace_bytes(batch, q_heads, head_dim, num_splits);
    if (needed > 0 && (workspace == nullptr || workspace_bytes < needed)) return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (batch == 0) return 0;

    AttnArgs a{};
    a.q = q;
    a.k_cache = k_cache;
    a.v_cache = v_cache;
    a.slot_stride = cache_slot_stride;
    a.head_stride = cache_head_stride;
    a.pos_stride = cache_pos_stride;
    a.num_slots = num_slots;
    a.max_len = max_len;
    a.slot_ids = slot_ids;
    a.lengths = lengths;
    a.out = out;
    const size_t heads = static_cast<size_t>(batch) * q_heads * num_splits;
    a.ws_acc = static_cast<float*>(workspace);
    a.ws_max = needed > 0 ? a.ws_acc + heads * head_dim : nullptr;
    a.ws_sum = needed > 0 ? a.ws_max + heads : nullptr;
    a.q_heads = q_heads;
    a.kv_heads = kv_heads;
    a.num_splits = num_splits;
    a.scale_log2 = scale * kLog2e;

    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        constexpr int kVec = 16 / sizeof(T);
        if (cache_slot_stride % kVec != 0 || cache_head_stride % kVec != 0 || cache_pos_stride % kVec != 0 ||
            !aligned16(q) || !aligned16(k_cache) || !aligned16(v_cache))
            return VOXCPM_ERROR_INVALID_ARGUMENT;
        if (head_dim == 64) return launch_for_group<T, 64>(a, batch, s);
        return launch_for_group<T, 128>(a, batch, s);
    });
}
