// Decode attention (one query token per stream) with grouped-query heads over ragged per-slot
// lengths. A block serves query heads that share one KV head, so each key and value row is read
// once for the whole group; a stream's live range is cut into num_splits equal pieces (split-K,
// merged by a second kernel) so a small batch still spreads over the GPU. The grid shape depends
// only on the batch, never on the lengths, which keeps it capturable in a CUDA graph.
//
// bf16 / fp16 on compute capability >= 8 (tensor cores, the production path): the kernel is a
// stream of K/V rows, so what decides its speed is how many bytes each multiprocessor keeps in
// flight. Each warp walks 16-key steps of the block's piece (warp w of W takes steps w, w + W, ...) and
// loads a whole step (8 KB at head_dim 128) straight into registers with 16-byte loads, issuing the
// next step's loads before it computes on the current one; there are no block barriers in the loop.
// The loads are laid out so the registers already are mma.sync operands:
//   logits S[head, key] = Q . K^T: Q is the A operand (query heads as rows; a group of <= 8 fills
//     half the rows, the tensor cores have throughput to spare), K rows the column-major B operand.
//     Lane (g, q) loads key g of an 8-key tile at dims 32j + 8q..: the dot product runs over dims
//     in a permuted order, and Q is loaded in the same order.
//   out^T[dim, head] = V^T . P^T: V^T is the A operand (dims as rows), P^T the B operand (heads as
//     columns, so a group of 8 wastes nothing). The A operand pairs two keys' values of one dim in
//     a register; lane (g, q) loads keys 2q, 2q+1, 2q+8, 2q+9 at dims 64h + 8g.. and pairs them with
//     byte permutes. P^T's fragment is exactly the logits' accumulator layout, so the
//     probabilities never leave their lanes.
// Logits accumulate in fp32 (products of 16-bit values are exact); the probabilities enter the
// tensor cores as hi + lo 16-bit parts (two mma), keeping ~16 of their mantissa bits. The warps'
// partial softmax states are merged through shared memory at the end.
// voxcpm_decode_attention_rope folds rope_kv_write into this kernel (ROPE): q comes raw from the
// projection and is rotated in the registers it is loaded into (the permuted order keeps dims d and
// d + D / 2 in one lane), and the blocks whose split reads the token's position write its rotated
// k and its v there before their warps load keys. At one stream that saved a kernel boundary per LM
// layer (perf/RESULTS.md run 95).
//
// fp32 (and older GPUs, or VOXCPM_DECODE_ATTENTION_MMA=0 for A/B timing): the CUDA-core kernel, 8
// query heads per block over 128-key tiles of logits in shared memory.
#include <math.h>
#include <stdlib.h>

#include <initializer_list>
#include <type_traits>

#include "common.cuh"
#include "mma.cuh"
#include "rope_rotation.cuh"
#include "row_statistic.cuh"

namespace voxcpm {
namespace {

constexpr int kMinPiece = 32;  // fewer keys per split cost more in the combine than they save
constexpr int kMaxSplits = 256;
constexpr float kLog2e = 1.4426950408889634f;

struct AttnArgs {
    const void* q;  // [batch] rows of q_row_stride elements, q_heads x head_dim each
    int64_t q_row_stride;
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
    int heads_per_block;  // tensor-core kernel: query heads of one group per block (<= 16)
    float scale_log2;  // softmax scale folded with log2(e): exp2 replaces exp
    // With the rotation folded in (voxcpm_decode_attention_rope): q is the qkv projection's raw q,
    // and this token's raw k and v rows are written, rotated (and scaled), to the cache at
    // positions[b] by the blocks that read that position (rope_kv_write's work).
    const void* k_new;
    const void* v_new;
    int64_t kv_row_stride;
    const int32_t* positions;
    const float* cos;  // [table_len, head_dim] or NULL
    const float* sin;
    int64_t table_len;
    const void* norm_input;  // [batch, hidden] or NULL: q, k and v scaled by the row's RMSNorm statistic
    int hidden;
    int norm_vectors;
    float eps;
};

// The live key range [start, end) of a block's split (empty for padding rows, unknown slots and
// splits past the stream's length).
struct KeyRange {
    int64_t start, end;
};

__device__ __forceinline__ KeyRange split_range(const AttnArgs& a, int64_t b, int split, int granule) {
    const int32_t slot = a.slot_ids[b];
    int64_t len = a.lengths[b];
    if (slot < 0 || slot >= a.num_slots || len < 0) len = 0;
    if (len > a.max_len) len = a.max_len;
    int64_t piece = (len + a.num_splits - 1) / a.num_splits;
    if (piece < kMinPiece) piece = kMinPiece;
    piece = (piece + granule - 1) / granule * granule;
    const int64_t start = split * piece;
    return {start, start + piece < len ? start + piece : len};
}

// ---- CUDA-core kernel (fp32, older GPUs) ----

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTile = 128;  // keys whose logits are held in shared memory at a time

template <typename T, int D, int GT>
__global__ void __launch_bounds__(kThreads, 2) decode_attention_cuda_core_kernel(AttnArgs a) {
    constexpr int ELEMS = 16 / sizeof(T);  // elements per 16-byte access
    constexpr int LPK = D / ELEMS;         // lanes sharing one key row
    constexpr int KPW = 32 / LPK;          // key rows a warp covers per access
    constexpr int NR = kThreads / LPK;     // value rows the block covers per access
    static_assert(LPK <= 32 && 32 % LPK == 0, "head_dim must span at most one warp");

    __shared__ float logits[GT][kTile];
    __shared__ float reduce[kWarps][GT][D];
    __shared__ float run_max[GT], run_sum[GT], rescale[GT];

    pdl_launch_dependents();
    pdl_wait();  // q and the caches come from the kernels before this one

    const int split = blockIdx.x;
    const int groups_per_kv = (a.q_heads / a.kv_heads) / GT;
    const int kv_head = blockIdx.y / groups_per_kv;
    const int q_head0 = kv_head * (a.q_heads / a.kv_heads) + (blockIdx.y % groups_per_kv) * GT;
    const int64_t b = blockIdx.z;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int c = threadIdx.x % LPK;  // which 16-byte column of a row this thread handles

    const int32_t slot = a.slot_ids[b];
    const KeyRange range = split_range(a, b, split, 1);
    const int64_t start = range.start;
    const int64_t end = range.end;

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

// ---- Tensor-core kernel (bf16 / fp16, compute capability >= 8) ----

// Warps per block: 4, two blocks per multiprocessor (~250 registers a thread). A grid of one split
// per stream that has at most one block per multiprocessor leaves half of every multiprocessor's
// slots empty and each warp a long serial walk of its stream's keys (64 streams of VoxCPM2's base LM:
// 128 blocks, ~5 steps a warp at 300 keys). There blocks of 8 warps walk half as far, one per
// multiprocessor, and merge 8 partial states instead of 4 (mma_warps).
constexpr int kMmaWarps = 4;
constexpr int kMmaWideWarps = 8;
constexpr int kStep = 16;  // keys per warp step: two 8-key logits tiles, one P.V k-step
constexpr int64_t kMaxMmaPosStride = (INT32_MAX - 64) / kStep;  // LaneRows' offsets stay 32-bit

// 16 bytes of global memory as four registers, or zeros where `live` is false: rows past a
// stream's live range are never read (they may hold stale, even non-finite, values).
__device__ __forceinline__ void load16(uint32_t (&r)[4], const void* p, bool live) {
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (live) v = *reinterpret_cast<const uint4*>(p);
    r[0] = v.x;
    r[1] = v.y;
    r[2] = v.z;
    r[3] = v.w;
}

// One warp step's keys and values, as loaded by lane (g, q) (g = lane / 4, q = lane % 4).
template <int D>
struct StepRegs {
    uint32_t k[2][D / 32][4];  // key 8t + g of the step, dims 32j + 8q .. + 7
    uint32_t v[4][D / 64][4];  // keys {2q, 2q + 1, 2q + 8, 2q + 9} of the step, dims 64h + 8g .. + 7
};

// The rows lane (g, q) loads, as key indices within a step and element offsets from the step's
// first key row (32-bit: the host sends position strides past kMaxMmaPosStride elsewhere).
struct LaneRows {
    int k_key[2], v_key[4];
    int k[2], v[4];
};

__device__ __forceinline__ LaneRows lane_rows(int pos_stride, int g, int q) {
    LaneRows o;
#pragma unroll
    for (int t = 0; t < 2; ++t) {
        o.k_key[t] = 8 * t + g;
        o.k[t] = o.k_key[t] * pos_stride + 8 * q;
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        o.v_key[r] = 2 * q + (r & 1) + 8 * (r >> 1);
        o.v[r] = o.v_key[r] * pos_stride + 8 * g;
    }
    return o;
}

// Issues every load of the step whose first key row is `k_rows` / `v_rows`; the step's `live`
// keys are [0, live).
template <typename T, int D>
__device__ __forceinline__ void load_step(StepRegs<D>& s, const T* k_rows, const T* v_rows, const LaneRows& o,
                                          int live) {
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int j = 0; j < D / 32; ++j) load16(s.k[t][j], k_rows + o.k[t] + 32 * j, o.k_key[t] < live);
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int h = 0; h < D / 64; ++h) load16(s.v[r][h], v_rows + o.v[r] + 64 * h, o.v_key[r] < live);
}

// A warp's running softmax state for NH tiles of 8 query heads. Lane (g, q) keeps the max and
// (its quarter of) the denominator of head 8 nh + g, and out^T columns 2q, 2q + 1 of each tile.
template <int D, int NH>
struct WarpState {
    float o[NH][D / 16][4];
    float m[NH];
    float l[NH];
};

// Logits, online softmax and P.V of one step; keys [live, 16) of the step are masked.
template <typename T, int D, int NH>
__device__ __forceinline__ void attend_step(WarpState<D, NH>& st, const StepRegs<D>& s,
                                            const uint32_t (&qa)[NH][D / 32][4], int live, float scale_log2,
                                            int q) {
    // logits[t][c]: heads g (c = 0, 1) and g + 8 (c = 2, 3), keys 8t + 2q + (c & 1).
    float logits[2][4];
#pragma unroll
    for (int t = 0; t < 2; ++t) {
        logits[t][0] = logits[t][1] = logits[t][2] = logits[t][3] = 0.f;
#pragma unroll
        for (int j = 0; j < D / 32; ++j)
#pragma unroll
            for (int u = 0; u < 2; ++u) {
                const uint32_t frag[4] = {qa[0][j][2 * u], NH > 1 ? qa[NH - 1][j][2 * u] : 0u, qa[0][j][2 * u + 1],
                                          NH > 1 ? qa[NH - 1][j][2 * u + 1] : 0u};
                Mma<T>::run(logits[t], frag, s.k[t][j][2 * u], s.k[t][j][2 * u + 1]);
            }
    }

    uint32_t p_hi[NH][2], p_lo[NH][2];  // P^T B operands: keys 2q.. (tile 0) and 8 + 2q.. (tile 1)
    float alpha[NH];
#pragma unroll
    for (int nh = 0; nh < NH; ++nh) {
        float x[2][2];
        float mx = -INFINITY;
#pragma unroll
        for (int t = 0; t < 2; ++t)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                x[t][c] = 8 * t + 2 * q + c < live ? logits[t][2 * nh + c] * scale_log2 : -INFINITY;
                mx = fmaxf(mx, x[t][c]);
            }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(st.m[nh], mx);  // finite: key 0 of a step is always live
        alpha[nh] = exp2f(st.m[nh] - m_new);
        st.m[nh] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int t = 0; t < 2; ++t) {
            const float p0 = exp2f(x[t][0] - m_new);
            const float p1 = exp2f(x[t][1] - m_new);
            sum += p0 + p1;
            split_pair<T>(p0, p1, p_hi[nh][t], p_lo[nh][t]);
        }
        st.l[nh] = st.l[nh] * alpha[nh] + sum;
    }

    // out^T columns 2q, 2q + 1 belong to the heads whose statistics lanes 8q and 8q + 4 hold.
    const int src = 8 * q;
#pragma unroll
    for (int nh = 0; nh < NH; ++nh) {
        const float a0 = __shfl_sync(0xffffffffu, alpha[nh], src);
        const float a1 = __shfl_sync(0xffffffffu, alpha[nh], src + 4);
#pragma unroll
        for (int mt = 0; mt < D / 16; ++mt) {
            st.o[nh][mt][0] *= a0;
            st.o[nh][mt][1] *= a1;
            st.o[nh][mt][2] *= a0;
            st.o[nh][mt][3] *= a1;
        }
    }

    // m-tile 4h + u: row g is dim 64h + 8g + 2u, row g + 8 the dim after it; two keys per register.
#pragma unroll
    for (int h = 0; h < D / 64; ++h)
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const uint32_t frag[4] = {__byte_perm(s.v[0][h][u], s.v[1][h][u], 0x5410),
                                      __byte_perm(s.v[0][h][u], s.v[1][h][u], 0x7632),
                                      __byte_perm(s.v[2][h][u], s.v[3][h][u], 0x5410),
                                      __byte_perm(s.v[2][h][u], s.v[3][h][u], 0x7632)};
#pragma unroll
            for (int nh = 0; nh < NH; ++nh) {
                Mma<T>::run(st.o[nh][4 * h + u], frag, p_hi[nh][0], p_hi[nh][1]);
                Mma<T>::run(st.o[nh][4 * h + u], frag, p_lo[nh][0], p_lo[nh][1]);
            }
        }
}

// Rotate-half RoPE of lane (g, q)'s registers of one row, dims 32j + 8q.. (j < D / 32, as the key
// loads order them: dims d and d + D / 2 sit in words j and j + D / 64 of the same lane), each value
// first multiplied by `factor`, rounded to T once. Products rounded on their own, as rope_kv_write.
template <typename T, int D>
__device__ __forceinline__ void rotate_row(uint32_t (&row)[D / 32][4], const float* cos_row, const float* sin_row,
                                           int q, float factor) {
#pragma unroll
    for (int j = 0; j < D / 64; ++j)
#pragma unroll
        for (int w = 0; w < 4; ++w) {
            const float2 first = Mma<T>::unpack(row[j][w]);
            const float2 second = Mma<T>::unpack(row[j + D / 64][w]);
            float x1[2] = {first.x * factor, first.y * factor};
            float x2[2] = {second.x * factor, second.y * factor};
            if (cos_row != nullptr) {
#pragma unroll
                for (int c = 0; c < 2; ++c) {
                    const int d = 32 * j + 8 * q + 2 * w + c;
                    rope_pair(x1[c], x2[c], cos_row[d], sin_row[d], cos_row[d + D / 2], sin_row[d + D / 2]);
                }
            }
            row[j][w] = Mma<T>::pack(x1[0], x1[1]);
            row[j + D / 64][w] = Mma<T>::pack(x2[0], x2[1]);
        }
}

// rope_kv_write's work for stream b inside the attention kernel: q rotated in its registers, and
// this token's k (rotated) and v written to the cache by the blocks whose split reads their position
// (by split 0's where none does), before any of their warps loads a key. The caller's block barrier
// follows. All threads of the block call it (the statistic is a block reduction).
template <typename T, int D, int NH>
__device__ __forceinline__ void fold_rope(const AttnArgs& a, int64_t b, int kv_head, int split, const KeyRange& range,
                                          uint32_t (&qa)[NH][D / 32][4], int q) {
    const float factor = a.norm_input == nullptr
        ? 1.f : block_row_scale(static_cast<const T*>(a.norm_input) + b * a.hidden, a.hidden, a.norm_vectors, a.eps);
    const int32_t pos = a.positions[b];
    const int64_t table_pos = pos < 0 ? 0 : (pos >= a.table_len ? a.table_len - 1 : pos);
    const float* cos_row = a.cos == nullptr ? nullptr : a.cos + table_pos * D;
    const float* sin_row = a.sin == nullptr ? nullptr : a.sin + table_pos * D;
#pragma unroll
    for (int nh = 0; nh < NH; ++nh) rotate_row<T, D>(qa[nh], cos_row, sin_row, q, factor);

    const int32_t slot = a.slot_ids[b];
    const bool in_cache = slot >= 0 && slot < a.num_slots && pos >= 0 && pos < a.max_len;
    const bool read_here = pos >= range.start && pos < range.end;
    const bool read_anywhere = pos < a.lengths[b] && pos < a.max_len;
    if (!in_cache || !(read_here || (!read_anywhere && split == 0))) return;
    const int64_t at = slot * a.slot_stride + kv_head * a.head_stride + pos * a.pos_stride;
    const T* k_src = static_cast<const T*>(a.k_new) + b * a.kv_row_stride + kv_head * D;
    const T* v_src = static_cast<const T*>(a.v_new) + b * a.kv_row_stride + kv_head * D;
    // The caches are written here only, at a position no other block of this launch reads.
    T* k_dst = static_cast<T*>(const_cast<void*>(a.k_cache)) + at;
    T* v_dst = static_cast<T*>(const_cast<void*>(a.v_cache)) + at;
    constexpr int kPairs = D / 2 / 8;
    for (int i = threadIdx.x; i < kPairs + D / 8; i += blockDim.x) {
        if (i < kPairs) {
            rotate_scaled<T, 8>(k_src, k_dst, cos_row, sin_row, i * 8, D / 2, factor);
        } else {
            float x[8];
            const int d = (i - kPairs) * 8;
            load_vec<T, 8>(v_src + d, x);
#pragma unroll
            for (int e = 0; e < 8; ++e) x[e] *= factor;
            store_vec<T, 8>(v_dst + d, x);
        }
    }
}

template <typename T, int D, int NH, int W, bool ROPE>
__global__ void __launch_bounds__(W * 32, 8 / W) decode_attention_mma_kernel(AttnArgs a) {
    constexpr int HB = 8 * NH;  // head rows of the block's tiles
    static_assert(D % 64 == 0, "head_dim must be a multiple of 64");
    static_assert(W == kMmaWarps || (W == kMmaWideWarps && NH == 1), "8-warp blocks serve one head tile");

    __shared__ float4 part_o[W][HB][D / 4];  // each warp's unnormalised out rows
    __shared__ float part_m[W][HB], part_l[W][HB];

    pdl_launch_dependents();
    pdl_wait();  // q and the caches come from the kernels before this one

    const int split = blockIdx.x;
    const int group = a.q_heads / a.kv_heads;
    const int chunks = (group + a.heads_per_block - 1) / a.heads_per_block;
    const int kv_head = blockIdx.y / chunks;
    const int head0 = (blockIdx.y - kv_head * chunks) * a.heads_per_block;  // within the group
    const int heads = min(a.heads_per_block, group - head0);
    const int64_t b = blockIdx.z;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int g = lane >> 2;
    const int q = lane & 3;

    const int64_t first_head = b * a.q_heads + kv_head * group + head0;

    // Query rows g and g + 8 of the block's tiles, dims in the order the key loads use; issued
    // before the stream's slot and length are read, so both loads share one round trip.
    const T* q_rows = static_cast<const T*>(a.q) + b * a.q_row_stride + (kv_head * group + head0) * D;
    uint32_t qa[NH][D / 32][4];
#pragma unroll
    for (int nh = 0; nh < NH; ++nh)
#pragma unroll
        for (int j = 0; j < D / 32; ++j) {
            const int row = 8 * nh + g;
            load16(qa[nh][j], q_rows + (row < heads ? row : 0) * D + 32 * j + 8 * q, row < heads);
        }

    const KeyRange range = split_range(a, b, split, kStep);
    if constexpr (ROPE) {
        fold_rope<T, D, NH>(a, b, kv_head, split, range, qa, q);
        __syncthreads();  // this token's cache rows are written before any warp loads them
    }
    WarpState<D, NH> st;
#pragma unroll
    for (int nh = 0; nh < NH; ++nh) {
        st.m[nh] = -INFINITY;
        st.l[nh] = 0.f;
#pragma unroll
        for (int mt = 0; mt < D / 16; ++mt) st.o[nh][mt][0] = st.o[nh][mt][1] = st.o[nh][mt][2] = st.o[nh][mt][3] = 0.f;
    }

    int64_t key = range.start + warp * kStep;
    if (key < range.end) {
        const int32_t slot = a.slot_ids[b];  // valid: the range is empty otherwise
        const T* k_head = static_cast<const T*>(a.k_cache) + slot * a.slot_stride + kv_head * a.head_stride;
        const T* v_head = static_cast<const T*>(a.v_cache) + slot * a.slot_stride + kv_head * a.head_stride;
        const LaneRows rows = lane_rows(static_cast<int>(a.pos_stride), g, q);
        constexpr int kStride = W * kStep;
        auto live_keys = [&](int64_t first) {
            return static_cast<int>(range.end - first < kStep ? range.end - first : kStep);
        };
        auto load = [&](StepRegs<D>& step, int64_t first) {
            load_step<T, D>(step, k_head + first * a.pos_stride, v_head + first * a.pos_stride, rows, live_keys(first));
        };
        if constexpr (NH == 1) {
            // Two register buffers: the next step's loads are in flight while this step computes
            // (~250 registers at head_dim 128, two blocks per multiprocessor).
            StepRegs<D> even, odd;
            load(even, key);
            while (true) {
                const int64_t next = key + kStride;
                if (next < range.end) load(odd, next);
                attend_step<T, D, NH>(st, even, qa, live_keys(key), a.scale_log2, q);
                if (next >= range.end) break;
                const int64_t after = next + kStride;
                if (after < range.end) load(even, after);
                attend_step<T, D, NH>(st, odd, qa, live_keys(next), a.scale_log2, q);
                if (after >= range.end) break;
                key = after;
            }
        } else {
            // Two head tiles' state leaves room for one buffer only.
            for (; key < range.end; key += kStride) {
                StepRegs<D> step;
                load(step, key);
                attend_step<T, D, NH>(st, step, qa, live_keys(key), a.scale_log2, q);
            }
        }
    }

    // The warp's state to shared memory: out^T columns 2q + i are heads 8 nh + 2q + i, rows of
    // m-tile 4h + u are dims 64h + 8g + 2u (+1 for c = 2, 3).
#pragma unroll
    for (int nh = 0; nh < NH; ++nh) {
        float l = st.l[nh];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        if (q == 0) {
            part_m[warp][8 * nh + g] = st.m[nh];
            part_l[warp][8 * nh + g] = l;
        }
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int h = 0; h < D / 64; ++h) {
                const float(&o)[D / 16][4] = st.o[nh];
                float4* dst = &part_o[warp][8 * nh + 2 * q + i][(64 * h + 8 * g) / 4];
                dst[0] = make_float4(o[4 * h][i], o[4 * h][2 + i], o[4 * h + 1][i], o[4 * h + 1][2 + i]);
                dst[1] = make_float4(o[4 * h + 2][i], o[4 * h + 2][2 + i], o[4 * h + 3][i], o[4 * h + 3][2 + i]);
            }
    }
    __syncthreads();

    // Merge the warps: rescale each to the common max (warps without keys have max -inf, sum 0).
    for (int i = threadIdx.x; i < heads * (D / 4); i += W * 32) {
        const int h = i / (D / 4);
        const int d4 = i - h * (D / 4);
        float mx = -INFINITY;
#pragma unroll
        for (int w = 0; w < W; ++w) mx = fmaxf(mx, part_m[w][h]);
        float denom = 0.f;
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        if (mx != -INFINITY) {
#pragma unroll
            for (int w = 0; w < W; ++w) {
                const float weight = exp2f(part_m[w][h] - mx);
                const float4 o = part_o[w][h][d4];
                denom += part_l[w][h] * weight;
                acc[0] += o.x * weight;
                acc[1] += o.y * weight;
                acc[2] += o.z * weight;
                acc[3] += o.w * weight;
            }
        }
        const int64_t head = first_head + h;
        if (a.num_splits == 1) {
            const float inv = denom > 0.f ? 1.f / denom : 0.f;
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[e] *= inv;
            store_vec<T, 4>(static_cast<T*>(a.out) + head * D + 4 * d4, acc);
        } else {
            const int64_t at = head * a.num_splits + split;
            reinterpret_cast<float4*>(a.ws_acc + at * D)[d4] = make_float4(acc[0], acc[1], acc[2], acc[3]);
            if (d4 == 0) {
                a.ws_max[at] = mx;
                a.ws_sum[at] = denom;
            }
        }
    }
}

// ---- Split combine ----

// Combines the splits of one (stream, query head): rescale each partial to the common maximum.
// Warp 0 turns every split's (max, sum) into a weight in one round of loads; then each thread sums
// its dim over the splits (every split's partial is written, zeros for empty ones).
template <typename T, int D>
__global__ void __launch_bounds__(D) combine_splits_kernel(const float* __restrict__ ws_acc,
                                                           const float* __restrict__ ws_max,
                                                           const float* __restrict__ ws_sum, T* __restrict__ out,
                                                           int num_splits) {
    __shared__ float weight[kMaxSplits];
    __shared__ float denom;
    pdl_launch_dependents();
    pdl_wait();  // the partials come from the attention kernel
    const int64_t head = blockIdx.x;
    const int d = threadIdx.x;
    if (d < 32) {
        const float* m = ws_max + head * num_splits;
        const float* l = ws_sum + head * num_splits;
        float global_max = -INFINITY;
        for (int s = d; s < num_splits; s += 32) global_max = fmaxf(global_max, m[s]);
        global_max = warp_max(global_max);
        float total = 0.f;
        for (int s = d; s < num_splits; s += 32) {
            const float w = l[s] > 0.f ? exp2f(m[s] - global_max) : 0.f;  // empty splits: max -inf, sum 0
            weight[s] = w;
            total += l[s] * w;
        }
        total = warp_sum(total);
        if (d == 0) denom = total;
    }
    __syncthreads();
    const float* acc = ws_acc + head * num_splits * D + d;
    float total = 0.f;
#pragma unroll 8
    for (int s = 0; s < num_splits; ++s) total += acc[s * D] * weight[s];
    out[head * D + d] = from_float<T>(denom > 0.f ? total / denom : 0.f);
}

template <typename T, int D>
int launch_combine(const AttnArgs& a, int64_t batch, cudaStream_t stream) {
    if (a.num_splits == 1) return 0;
    return launch_kernel(combine_splits_kernel<T, D>, dim3(static_cast<unsigned>(batch * a.q_heads)), dim3(D), 0,
                         stream, a.ws_acc, a.ws_max, a.ws_sum, static_cast<T*>(a.out), a.num_splits);
}

template <typename T, int D, int GT>
int launch_cuda_core(const AttnArgs& a, int64_t batch, cudaStream_t stream) {
    const dim3 grid(a.num_splits, a.kv_heads * ((a.q_heads / a.kv_heads) / GT), static_cast<unsigned>(batch));
    const int err = launch_kernel(decode_attention_cuda_core_kernel<T, D, GT>, grid, dim3(kThreads), 0, stream, a);
    return err != 0 ? err : launch_combine<T, D>(a, batch, stream);
}

// The largest heads-per-block (8, 4, 2, 1) dividing the group size: 8 keeps the accumulators of a
// thread within registers.
template <typename T, int D>
int launch_cuda_core_for_group(const AttnArgs& a, int64_t batch, cudaStream_t stream) {
    const int group = a.q_heads / a.kv_heads;
    if (group % 8 == 0) return launch_cuda_core<T, D, 8>(a, batch, stream);
    if (group % 4 == 0) return launch_cuda_core<T, D, 4>(a, batch, stream);
    if (group % 2 == 0) return launch_cuda_core<T, D, 2>(a, batch, stream);
    return launch_cuda_core<T, D, 1>(a, batch, stream);
}

template <typename T, int D, int NH, int W, bool ROPE>
int launch_mma(AttnArgs a, int64_t batch, cudaStream_t stream) {
    const int group = a.q_heads / a.kv_heads;
    a.heads_per_block = group < 8 * NH ? group : 8 * NH;
    const int chunks = (group + a.heads_per_block - 1) / a.heads_per_block;
    if (static_cast<int64_t>(a.kv_heads) * chunks > 65535) return VOXCPM_ERROR_INVALID_ARGUMENT;
    const dim3 grid(a.num_splits, a.kv_heads * chunks, static_cast<unsigned>(batch));
    const int err = launch_kernel(decode_attention_mma_kernel<T, D, NH, W, ROPE>, grid, dim3(W * 32), 0, stream, a);
    return err != 0 ? err : launch_combine<T, D>(a, batch, stream);
}

// Warps per block for a grid of `blocks` (one head tile each): 8 where the grid is one split per
// stream and at most one block per multiprocessor, else 4. VOXCPM_DECODE_ATTENTION_WARPS=4 or 8
// forces either (A/B timing and the tests; read on every call so a test can switch it).
__host__ int mma_warps(const AttnArgs& a, int64_t blocks) {
    const char* value = getenv("VOXCPM_DECODE_ATTENTION_WARPS");
    if (value != nullptr && value[0] == '4') return kMmaWarps;
    if (value != nullptr && value[0] == '8') return kMmaWideWarps;
    return a.num_splits == 1 && blocks <= multiprocessors() ? kMmaWideWarps : kMmaWarps;
}

// Groups of up to 8 heads fill one 8-column tile of out^T; larger groups take blocks of 16 heads.
template <typename T, int D, bool ROPE = false>
int launch_mma_for_group(const AttnArgs& a, int64_t batch, cudaStream_t stream) {
    const int group = a.q_heads / a.kv_heads;
    if (group > 8) return launch_mma<T, D, 2, kMmaWarps, ROPE>(a, batch, stream);
    if (mma_warps(a, batch * a.kv_heads * a.num_splits) == kMmaWideWarps)
        return launch_mma<T, D, 1, kMmaWideWarps, ROPE>(a, batch, stream);
    return launch_mma<T, D, 1, kMmaWarps, ROPE>(a, batch, stream);
}

// VOXCPM_DECODE_ATTENTION_MMA=0 sends bf16 / fp16 to the CUDA-core kernel (A/B timing). Read on
// every call so a test can switch it.
__host__ bool mma_allowed() {
    const char* value = getenv("VOXCPM_DECODE_ATTENTION_MMA");
    return value == nullptr || value[0] != '0';
}

}  // namespace
}  // namespace voxcpm

extern "C" size_t voxcpm_decode_attention_workspace_bytes(int64_t batch, int q_heads, int head_dim,
                                                          int num_splits) {
    if (num_splits <= 1 || batch <= 0 || q_heads <= 0 || head_dim <= 0) return 0;
    const size_t heads = static_cast<size_t>(batch) * q_heads * num_splits;
    return heads * (static_cast<size_t>(head_dim) + 2) * sizeof(float);
}

namespace voxcpm {
namespace {

// The arguments both entry points share, checked; returns 0 or an error code (-1: nothing to do).
int prepare(AttnArgs& a, const void* q, const void* k_cache, const void* v_cache, int64_t cache_slot_stride,
            int64_t cache_head_stride, int64_t cache_pos_stride, int64_t num_slots, int64_t max_len,
            const int32_t* slot_ids, const int32_t* lengths, void* out, void* workspace, size_t workspace_bytes,
            int64_t batch, int q_heads, int kv_heads, int head_dim, int num_splits, float scale, int* major) {
    if (batch < 0 || batch > 65535 || q_heads <= 0 || kv_heads <= 0 || q_heads % kv_heads != 0 ||
        (head_dim != 64 && head_dim != 128) || num_splits < 1 || num_splits > kMaxSplits || num_slots < 0 ||
        max_len < 0)
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (q == nullptr || k_cache == nullptr || v_cache == nullptr || slot_ids == nullptr ||
        lengths == nullptr || out == nullptr)
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    const size_t needed = voxcpm_decode_attention_workspace_bytes(batch, q_heads, head_dim, num_splits);
    // The split kernel stores its partial rows as float4.
    if (needed > 0 && (workspace == nullptr || workspace_bytes < needed || !aligned16(workspace)))
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (batch == 0) return -1;
    const int err = current_device_attribute(cudaDevAttrComputeCapabilityMajor, major);
    if (err != 0) return err;

    a.q = q;
    a.q_row_stride = static_cast<int64_t>(q_heads) * head_dim;
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
    return 0;
}

template <typename T> bool rows_aligned(int64_t slot_stride, int64_t head_stride, int64_t pos_stride,
                                        std::initializer_list<const void*> pointers) {
    constexpr int kVec = 16 / sizeof(T);
    if (slot_stride % kVec != 0 || head_stride % kVec != 0 || pos_stride % kVec != 0) return false;
    for (const void* p : pointers)
        if (!aligned16(p)) return false;
    return true;
}

}  // namespace
}  // namespace voxcpm

extern "C" int voxcpm_decode_attention(const void* q, const void* k_cache, const void* v_cache,
                                       int64_t cache_slot_stride, int64_t cache_head_stride,
                                       int64_t cache_pos_stride, int64_t num_slots, int64_t max_len,
                                       const int32_t* slot_ids, const int32_t* lengths, void* out,
                                       void* workspace, size_t workspace_bytes, int64_t batch,
                                       int q_heads, int kv_heads, int head_dim, int num_splits,
                                       float scale, int dtype, void* stream) {
    using namespace voxcpm;
    AttnArgs a{};
    int major = 0;
    const int err = prepare(a, q, k_cache, v_cache, cache_slot_stride, cache_head_stride, cache_pos_stride, num_slots,
                            max_len, slot_ids, lengths, out, workspace, workspace_bytes, batch, q_heads, kv_heads,
                            head_dim, num_splits, scale, &major);
    if (err != 0) return err == -1 ? 0 : err;
    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        if (!rows_aligned<T>(cache_slot_stride, cache_head_stride, cache_pos_stride, {q, k_cache, v_cache, out}))
            return VOXCPM_ERROR_INVALID_ARGUMENT;
        if constexpr (!std::is_same_v<T, float>) {
            if (major >= 8 && cache_pos_stride <= kMaxMmaPosStride && mma_allowed()) {
                if (head_dim == 64) return launch_mma_for_group<T, 64>(a, batch, s);
                return launch_mma_for_group<T, 128>(a, batch, s);
            }
        }
        if (head_dim == 64) return launch_cuda_core_for_group<T, 64>(a, batch, s);
        return launch_cuda_core_for_group<T, 128>(a, batch, s);
    });
}

extern "C" int voxcpm_decode_attention_rope(const void* q, int64_t q_row_stride, const void* k_new,
                                            const void* v_new, int64_t kv_row_stride, const float* cos,
                                            const float* sin, int64_t table_len, const int32_t* positions,
                                            const void* norm_input, int64_t hidden, float eps,
                                            const void* k_cache, const void* v_cache,
                                            int64_t cache_slot_stride, int64_t cache_head_stride,
                                            int64_t cache_pos_stride, int64_t num_slots, int64_t max_len,
                                            const int32_t* slot_ids, const int32_t* lengths, void* out,
                                            void* workspace, size_t workspace_bytes, int64_t batch,
                                            int q_heads, int kv_heads, int head_dim, int num_splits,
                                            float scale, int dtype, void* stream) {
    using namespace voxcpm;
    if (k_new == nullptr || v_new == nullptr || positions == nullptr || (cos == nullptr) != (sin == nullptr) ||
        (cos != nullptr && table_len < 1) || q_row_stride < static_cast<int64_t>(q_heads) * head_dim ||
        kv_row_stride < static_cast<int64_t>(kv_heads) * head_dim ||
        (norm_input != nullptr && (hidden <= 0 || hidden > 16384)))
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    AttnArgs a{};
    int major = 0;
    const int err = prepare(a, q, k_cache, v_cache, cache_slot_stride, cache_head_stride, cache_pos_stride, num_slots,
                            max_len, slot_ids, lengths, out, workspace, workspace_bytes, batch, q_heads, kv_heads,
                            head_dim, num_splits, scale, &major);
    if (err != 0) return err == -1 ? 0 : err;
    if (major < 8 || cache_pos_stride > kMaxMmaPosStride || !mma_allowed()) return VOXCPM_ERROR_INVALID_ARGUMENT;
    a.q_row_stride = q_row_stride;
    a.k_new = k_new;
    a.v_new = v_new;
    a.kv_row_stride = kv_row_stride;
    a.positions = positions;
    a.cos = cos;
    a.sin = sin;
    a.table_len = table_len;
    a.norm_input = norm_input;
    a.hidden = static_cast<int>(hidden);
    a.eps = eps;
    auto s = static_cast<cudaStream_t>(stream);
    const auto run = [&](auto tag) {
        using T = decltype(tag);
        constexpr int kVec = 16 / sizeof(T);
        if (!rows_aligned<T>(cache_slot_stride, cache_head_stride, cache_pos_stride, {q, k_new, v_new, k_cache, v_cache, out}) ||
            q_row_stride % kVec != 0 || kv_row_stride % kVec != 0 || (cos != nullptr && (!aligned16(cos) || !aligned16(sin))))
            return VOXCPM_ERROR_INVALID_ARGUMENT;
        a.norm_vectors = norm_input != nullptr && row_vectors<T>(norm_input, hidden);
        if (head_dim == 64) return launch_mma_for_group<T, 64, true>(a, batch, s);
        return launch_mma_for_group<T, 128, true>(a, batch, s);
    };
    if (dtype == VOXCPM_BFLOAT16) return run(__nv_bfloat16{});
    if (dtype == VOXCPM_FLOAT16) return run(__half{});
    return VOXCPM_ERROR_INVALID_ARGUMENT;
}
