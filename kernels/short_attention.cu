// Whole-sequence attention over short sequences (LocEnc, LocDiT: at most 32 tokens), read straight
// from the fused qkv projection output, RoPE included, output written in o_proj's [tokens, Hq * d]
// layout. A block serves query heads of one sequence that share one KV head and stages that head's
// K (rotated, rounded to the element type as the reference does) and V in shared memory.
//
// bf16 / fp16 on compute capability >= 8 (tensor cores): the group's query rows (head-major, token
// minor) form 16-row tiles, one per warp; in a grid of many blocks a block has only the warps its
// tiles need, so more blocks share a multiprocessor (see mma_block). A block stages its K and query
// rows rotated on their way to shared memory: a thread loads the same 16-byte pieces of a few rows of
// one token into registers at once, with that token's table piece (read from global memory: a few KB
// every block reads, so cache hits; nothing of them in shared memory), rotates and stores them, while
// V goes over by cp.async; then one barrier, and the warps work from shared memory alone. Logits = one mma.sync m16n8k16 per 16
// dims and 8 keys with fp32 accumulation (products of 16-bit values are exact in fp32). The
// probabilities are fp32; the weighted sum feeds them to the tensor cores as hi + lo 16-bit parts
// (two mma per tile), which keeps ~16 of their mantissa bits instead of the 8 one bf16 rounding would.
//
// fp32 (and older GPUs): CUDA cores, K and V staged as fp32. A warp serves R = 32 / TP query rows at
// once, TP >= seq_len lanes per row: for the logits lane c of a row owns key c (one dot product over
// d from shared memory, no shuffles); for the output it owns every TP-th vector of the row.
#include <math.h>

#include <algorithm>
#include <type_traits>

#include "common.cuh"
#include "mma.cuh"
#include "rope_rotation.cuh"
#include "row_statistic.cuh"

namespace voxcpm {
namespace {

constexpr int kWarps = 8;  // small batches: a head's rows of a <= 16-token sequence in one pass
constexpr int kThreads = kWarps * 32;
constexpr int kMaxLen = 32;
constexpr int kPad = 4;  // floats after each staged K / q row: lanes reading different rows hit different banks
constexpr float kLog2e = 1.4426950408889634f;

struct ShortArgs {
    const void* qkv;
    const float* cos;
    const float* sin;
    // Folded-norm callers: token t's q, k and v are scaled by row_scale[t] (the RMSNorm statistic the
    // qkv GEMM did not apply; see voxcpm_row_scale), or NULL for none.
    const float* row_scale;
    // Or that statistic computed here from the norm's input rows [tokens, hidden] (row_scale NULL).
    const void* norm_input;
    int hidden;
    int norm_vectors;  // row_vectors(norm_input, hidden): the summation order voxcpm_row_scale uses
    float eps;
    void* out;
    int seq_len, q_heads, kv_heads;
    int heads_per_block;  // CUDA-core kernel: query heads per block (a divisor of the group size)
    int tiles_per_block;  // tensor-core kernel: 16-row query tiles per block
    int stage_slots;      // tensor-core kernel: rows of one token a staging thread takes (<= kStageSlots)
    float scale_log2;  // softmax scale folded with log2(e): exp2 replaces exp
    int causal;
    uint32_t len_magic;  // ceil(2^32 / seq_len) for seq_len >= 2, for by_len
};

// (row / seq_len, row % seq_len) by a multiply-high instead of a division by a runtime value (~25
// instructions each, on every row index the kernels map to a head and a token): exact for
// row * (len_magic * seq_len - 2^32) < 2^32, i.e. any row below 2^27 with seq_len <= 32.
// seq_len 1 (whose magic would be 2^32) takes the row itself.
struct HeadToken {
    int head, token;
};

__device__ __forceinline__ HeadToken by_len(int row, const ShortArgs& a) {
    if (a.seq_len == 1) return {row, 0};
    const int head = static_cast<int>(__umulhi(static_cast<uint32_t>(row), a.len_magic));
    return {head, row - head * a.seq_len};
}

// READ_ONLY: through the non-coherent cache, for global data no kernel writes (the RoPE tables).
template <int N, bool READ_ONLY = false>
__device__ __forceinline__ void load_f32(const float* p, float (&out)[N]) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
        const float4* q = reinterpret_cast<const float4*>(p + i);
        const float4 v = READ_ONLY ? __ldg(q) : *q;
        out[i] = v.x;
        out[i + 1] = v.y;
        out[i + 2] = v.z;
        out[i + 3] = v.w;
    }
}

template <int N>
__device__ __forceinline__ void store_f32(float* p, const float (&in)[N]) {
#pragma unroll
    for (int i = 0; i < N; i += 4) *reinterpret_cast<float4*>(p + i) = make_float4(in[i], in[i + 1], in[i + 2], in[i + 3]);
}

// Rotates VEC rotate-half pairs (x1 at dims e.., x2 at e + D/2..) by one table row (rope_rotation.cuh's
// expression), rounded to T like apply_rope's result where ROUND (callers that store the pairs as T
// round them there, once: rounding twice would give the same bits for two more instructions a value).
// READ_ONLY as load_f32's.
template <typename T, int D, int VEC, bool READ_ONLY = false, bool ROUND = true>
__device__ __forceinline__ void rotate_pairs(float (&x1)[VEC], float (&x2)[VEC], const float* cos_row,
                                             const float* sin_row, int e) {
    constexpr int HALF = D / 2;
    float c1[VEC], s1[VEC], c2[VEC], s2[VEC];
    load_f32<VEC, READ_ONLY>(cos_row + e, c1);
    load_f32<VEC, READ_ONLY>(sin_row + e, s1);
    load_f32<VEC, READ_ONLY>(cos_row + e + HALF, c2);
    load_f32<VEC, READ_ONLY>(sin_row + e + HALF, s2);
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
        rope_pair(x1[i], x2[i], c1[i], s1[i], c2[i], s2[i]);
        if constexpr (ROUND) {
            x1[i] = round_to<T>(x1[i]);
            x2[i] = round_to<T>(x2[i]);
        }
    }
}

// Scales n values by token t's row scale (none when scales is NULL; scales points at the sequence's
// first token).
template <int N>
__device__ __forceinline__ void scale_row(float (&x)[N], const float* scales, int t) {
    if (scales == nullptr) return;
    const float factor = scales[t];
#pragma unroll
    for (int i = 0; i < N; ++i) x[i] *= factor;
}

// Loads VEC rotate-half pairs of token t's head row into x1, x2, scaled by scales[t] and rotated by
// table row t when tables are given.
template <typename T, int D, int VEC>
__device__ __forceinline__ void load_rotated(const T* src, const float* cos, const float* sin, const float* scales,
                                             int t, int e, float (&x1)[VEC], float (&x2)[VEC]) {
    load_vec<T, VEC>(src + e, x1);
    load_vec<T, VEC>(src + e + D / 2, x2);
    scale_row(x1, scales, t);
    scale_row(x2, scales, t);
    if (cos != nullptr) rotate_pairs<T, D, VEC>(x1, x2, cos + t * D, sin + t * D, e);
}

// load_rotated, stored as fp32 to dst (dims e.., e + D/2..).
template <typename T, int D, int VEC>
__device__ __forceinline__ void stage_rotated(const T* src, float* dst, const float* cos, const float* sin,
                                              const float* scales, int t, int e) {
    float x1[VEC], x2[VEC];
    load_rotated<T, D, VEC>(src, cos, sin, scales, t, e, x1, x2);
    store_f32<VEC>(dst + e, x1);
    store_f32<VEC>(dst + e + D / 2, x2);
}

template <int N>
__device__ __forceinline__ void load_shared(const float* p, float (&out)[N]) {
    if constexpr (N == 4) {
        const float4 v = *reinterpret_cast<const float4*>(p);
        out[0] = v.x;
        out[1] = v.y;
        out[2] = v.z;
        out[3] = v.w;
    } else if constexpr (N == 2) {
        const float2 v = *reinterpret_cast<const float2*>(p);
        out[0] = v.x;
        out[1] = v.y;
    } else {
        out[0] = *p;
    }
}

// The norm statistic of sequence seq's tokens into scales[0, seq_len), from a.norm_input: a warp per
// token, bit for bit voxcpm_row_scale's. The caller synchronises before reading them. Safe before
// pdl_wait(): the norm's input is final before the qkv GEMM (the kernel before this one) starts.
template <typename T>
__device__ __forceinline__ void norm_scales(const ShortArgs& a, int64_t seq, float* scales) {
    constexpr int VEC = 16 / sizeof(T);
    const int lane = threadIdx.x & 31;
    const T* x = static_cast<const T*>(a.norm_input) + seq * a.seq_len * a.hidden;
    for (int t = threadIdx.x >> 5; t < a.seq_len; t += blockDim.x >> 5) {
        const T* row = x + static_cast<int64_t>(t) * a.hidden;
        const float sum_sq = a.norm_vectors ? row_sum_squares<T, VEC>(row, a.hidden, lane)
                                            : row_sum_squares<T, 1>(row, a.hidden, lane);
        if (lane == 0) scales[t] = rms_scale(sum_sq, a.hidden, a.eps);
    }
}

template <typename T, int D, int TP>
__global__ void __launch_bounds__(kThreads) short_attention_kernel(ShortArgs a) {
    constexpr int VEC = 16 / sizeof(T);      // elements per 16-byte global access
    constexpr int HALF = D / 2;
    constexpr int PAIR_VECS = HALF / VEC;    // rotate-half vector pairs per head row
    constexpr int R = 32 / TP;               // query rows per warp pass
    constexpr int VW = D / TP < 4 ? D / TP : 4;  // output elements per lane access
    constexpr int NV = D / (TP * VW);        // output accesses per lane and row
    constexpr int KS = D + kPad;             // row stride of staged K and q
    static_assert(HALF % VEC == 0 && TP >= 4 && TP <= 32 && D % (TP * VW) == 0, "unsupported tile");

    extern __shared__ float4 shared_raw[];
    float* ks = reinterpret_cast<float*>(shared_raw);  // [seq_len][KS]
    float* vs = ks + a.seq_len * KS;                     // [seq_len][D]
    float* computed_scales = vs + a.seq_len * D + kWarps * R * KS;  // [seq_len], with norm_input
    const int64_t seq = blockIdx.x;
    pdl_launch_dependents();
    if (a.norm_input != nullptr) norm_scales<T>(a, seq, computed_scales);
    pdl_wait();
    if (a.norm_input != nullptr) __syncthreads();
    const float* scales = a.norm_input != nullptr ? computed_scales
                          : a.row_scale != nullptr ? a.row_scale + seq * a.seq_len : nullptr;

    const int L = a.seq_len;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int head0 = blockIdx.y * a.heads_per_block;
    const int kv_head = head0 / (a.q_heads / a.kv_heads);
    const int64_t width = static_cast<int64_t>(a.q_heads + 2 * a.kv_heads) * D;
    const T* rows = static_cast<const T*>(a.qkv) + seq * L * width;
    float* qs = vs + L * D + warp * R * KS;  // this warp's [R][KS] rotated query rows

    const T* k_src = rows + static_cast<int64_t>(a.q_heads + kv_head) * D;
    for (int i = threadIdx.x; i < L * PAIR_VECS; i += kThreads) {
        const int t = i / PAIR_VECS;
        stage_rotated<T, D, VEC>(k_src + t * width, ks + t * KS, a.cos, a.sin, scales, t, (i - t * PAIR_VECS) * VEC);
    }
    const T* v_src = rows + static_cast<int64_t>(a.q_heads + a.kv_heads + kv_head) * D;
    for (int i = threadIdx.x; i < L * (D / VEC); i += kThreads) {
        const int t = i / (D / VEC);
        const int e = (i - t * (D / VEC)) * VEC;
        float x[VEC];
        load_vec<T, VEC>(v_src + t * width + e, x);
        scale_row(x, scales, t);
        store_f32<VEC>(vs + t * D + e, x);
    }
    __syncthreads();

    const int sub = lane / TP;  // which of the pass's R rows this lane serves
    const int col = lane % TP;  // its key (logits) and its output column group
    const int key = col < L ? col : L - 1;  // lanes past the sequence compute a masked dummy
    const int block_rows = a.heads_per_block * L;
    const float* k_row = ks + key * KS;
    const float* q_row = qs + sub * KS;

    for (int base = warp * R; base < block_rows; base += kWarps * R) {
        for (int i = lane; i < R * PAIR_VECS; i += 32) {
            const int r = i / PAIR_VECS;
            const int row = min(base + r, block_rows - 1);
            const HeadToken q = by_len(row, a);
            const T* q_src = rows + q.token * width + static_cast<int64_t>(head0 + q.head) * D;
            stage_rotated<T, D, VEC>(q_src, qs + r * KS, a.cos, a.sin, scales, q.token, (i - r * PAIR_VECS) * VEC);
        }
        __syncwarp();

        const int row = base + sub;
        const HeadToken o = by_len(min(row, block_rows - 1), a);
        const int t = o.token;
        float dot[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int e = 0; e < D; e += 4) {
            const float4 qv = *reinterpret_cast<const float4*>(q_row + e);
            const float4 kv = *reinterpret_cast<const float4*>(k_row + e);
            dot[0] += qv.x * kv.x;
            dot[1] += qv.y * kv.y;
            dot[2] += qv.z * kv.z;
            dot[3] += qv.w * kv.w;
        }
        const bool live = col < L && (!a.causal || col <= t);
        const float logit = live ? ((dot[0] + dot[1]) + (dot[2] + dot[3])) * a.scale_log2 : -INFINITY;
        float mx = logit;
#pragma unroll
        for (int off = TP / 2; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
        const float p = live ? exp2f(logit - mx) : 0.f;  // key 0 is always live: mx is finite
        float sum = p;
#pragma unroll
        for (int off = TP / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);

        float acc[NV][VW];
#pragma unroll
        for (int v = 0; v < NV; ++v)
#pragma unroll
            for (int e = 0; e < VW; ++e) acc[v][e] = 0.f;
        for (int j = 0; j < L; ++j) {
            const float pj = __shfl_sync(0xffffffffu, p, sub * TP + j);
            const float* v_row = vs + j * D + col * VW;
#pragma unroll
            for (int v = 0; v < NV; ++v) {
                float x[VW];
                load_shared<VW>(v_row + v * TP * VW, x);
#pragma unroll
                for (int e = 0; e < VW; ++e) acc[v][e] += pj * x[e];
            }
        }
        if (row < block_rows) {
            const float inv = 1.f / sum;
            T* dst = static_cast<T*>(a.out) +
                     ((seq * L + t) * a.q_heads + head0 + o.head) * static_cast<int64_t>(D) + col * VW;
#pragma unroll
            for (int v = 0; v < NV; ++v) {
                float y[VW];
#pragma unroll
                for (int e = 0; e < VW; ++e) y[e] = acc[v][e] * inv;
                store_vec<T, VW>(dst + v * TP * VW, y);
            }
        }
        __syncwarp();  // the next pass overwrites this warp's staged query rows
    }
}

template <int D>
size_t shared_bytes(int seq_len, int tp) {
    const int r = 32 / tp;
    return sizeof(float) * (static_cast<size_t>(seq_len) * (D + kPad) + static_cast<size_t>(seq_len) * D +
                            static_cast<size_t>(kWarps) * r * (D + kPad) + static_cast<size_t>(seq_len));
}

template <typename T, int D, int TP>
int launch(const ShortArgs& a, int64_t sequences, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>(sequences), a.q_heads / a.heads_per_block);
    return launch_kernel(short_attention_kernel<T, D, TP>, grid, dim3(kThreads), shared_bytes<D>(a.seq_len, TP), stream,
                         a);
}

template <typename T, int D>
int launch_for_length(const ShortArgs& a, int64_t sequences, cudaStream_t stream) {
    if (a.seq_len <= 4) return launch<T, D, 4>(a, sequences, stream);
    if (a.seq_len <= 8) return launch<T, D, 8>(a, sequences, stream);
    if (a.seq_len <= 16) return launch<T, D, 16>(a, sequences, stream);
    return launch<T, D, 32>(a, sequences, stream);
}

// ---- Tensor-core kernel (bf16 / fp16) ----

constexpr int kMmaWarps = 8;  // one query tile each: a LocDiT group (8 heads x 11 tokens) is 6 tiles
constexpr int kMmaMinWarps = 4;  // a block of fewer tiles still stages with 4 warps: a shorter serial chain
constexpr int kTile = 16;  // query rows per warp tile (the mma's M)
// Most rows of one token whose 16-byte piece pairs a thread stages together (a LocDiT block at 64
// streams: a key row and 8 query heads, in 3 chunks): 3 pairs and one table piece are 56 registers.
constexpr int kStageSlots = 3;
// A grid of at most two blocks a multiprocessor gets up to this many warps, so that each staging
// thread takes one chunk (one round trip): at <= 96 registers a quadrant of the register file holds
// 5 warps, so two 10-warp blocks still fit a multiprocessor.
constexpr int kMaxStageWarps = 10;

// Staging items of a block (one per token, 16-byte piece pair and chunk of `slots` rows): a token has
// its key row and at most `query_rows` query rows (a block's query rows are contiguous in the group:
// ceil(rows / seq_len) a token).
__host__ __device__ inline int stage_items(int seq_len, int pair_vecs, int query_rows, int slots) {
    return seq_len * pair_vecs * ((query_rows + slots) / slots);
}

// Four 8x8 16-bit matrices from shared memory; lanes 8i..8i+7 give the row addresses of matrix i.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
#else
    (void)row;
    r[0] = r[1] = r[2] = r[3] = 0u;
#endif
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
#else
    (void)row;
    r[0] = r[1] = r[2] = r[3] = 0u;
#endif
}

// 16 bytes global -> shared without passing through registers (sm_80+).
__device__ __forceinline__ void copy_async16(void* dst, const void* src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" : : "r"(addr), "l"(src) : "memory");
#else
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
#endif
}

__device__ __forceinline__ void wait_async_copies() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_all;\n" : : : "memory");
#endif
}

// A 16-byte piece of 8 16-bit values as floats (element i at out[i]), and back, rounded once. From
// the register words, not load_vec through a pointer to them: that form compiled the staging to
// other, longer code (sm_80 / sm_90, nvcc 13.0), and pack_piece's word is what the stores index.
template <typename T>
__device__ __forceinline__ void unpack_piece(const uint4& w, float (&out)[8]) {
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 v = Mma<T>::unpack(words[i]);
        out[2 * i] = v.x;
        out[2 * i + 1] = v.y;
    }
}

template <typename T>
__device__ __forceinline__ uint4 pack_piece(const float (&in)[8]) {
    return make_uint4(Mma<T>::pack(in[0], in[1]), Mma<T>::pack(in[2], in[3]), Mma<T>::pack(in[4], in[5]),
                      Mma<T>::pack(in[6], in[7]));
}

// Thread layouts (PTX ISA, mma.m16n8k16): with g = lane / 4 and q = lane % 4, accumulator tile
// element (row, col) sits in c[0..1] at (g, 2q..2q+1) and c[2..3] at (g + 8, 2q..2q+1); the A
// fragment of a 16x16 tile is a[0]: (g, 2q..), a[1]: (g + 8, 2q..), a[2]: (g, 2q + 8..), a[3]:
// (g + 8, 2q + 8..), so two neighbouring accumulator tiles of P are the A fragment of one k-step.
// At most 96 registers: a multiprocessor's register file is four quadrants of 16K, each warp in one,
// so 6-warp blocks fit 3 to a multiprocessor (5 warps a quadrant) at <= 96 and only 2 at 98.
// __maxnreg__ needs nvcc 12.4; older compilers get the previous bound (up to kMaxStageWarps a block).
#if defined(__CUDACC_VER_MAJOR__) && \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 4))
#define VOXCPM_SHORT_ATTENTION_BOUNDS __maxnreg__(96)
#else
#define VOXCPM_SHORT_ATTENTION_BOUNDS __launch_bounds__(kMaxStageWarps * 32)
#endif
// Where the tensor-core kernel's row scales come from (folded norms): none, a.row_scale, or computed
// from a.norm_input. Separate instantiations, so that the unscaled kernel keeps its code: a runtime
// switch cost the step several percent on the H200 (perf/RESULTS.md run 62).
enum ScaleSource { kNoScales = 0, kGivenScales = 1, kInputScales = 2 };

template <typename T, int D, int TPAD, int SCALES>
__global__ void VOXCPM_SHORT_ATTENTION_BOUNDS short_attention_mma_kernel(ShortArgs a) {
    constexpr int VEC = 8;                // 16-bit elements per 16-byte access
    constexpr int HALF = D / 2;
    constexpr int PAIR_VECS = HALF / VEC;
    constexpr int ROW_VECS = D / VEC;
    constexpr int LD = D + 8;             // shared row stride: ldmatrix's 8 rows land on distinct banks
    constexpr int KEY_TILES = TPAD / 8;   // logits accumulator tiles (8 keys each)
    constexpr int OUT_TILES = D / 8;      // output accumulator tiles (8 dims each)
    constexpr bool SCALED = SCALES != kNoScales;
    static_assert(TPAD % 16 == 0 && D % 16 == 0, "unsupported tile");
    extern __shared__ float4 shared_raw[];
    T* ks = reinterpret_cast<T*>(shared_raw);  // [TPAD][LD] rotated keys
    T* vs = ks + TPAD * LD;                    // [TPAD][LD] values
    T* qs = vs + TPAD * LD;                    // [tiles_per_block * 16][LD] rotated query rows, later output rows
    float* key_scale = reinterpret_cast<float*>(qs + a.tiles_per_block * kTile * LD);  // SCALED: [TPAD]
    const int64_t seq = blockIdx.x;
    pdl_launch_dependents();
    const int L = a.seq_len;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int group = a.q_heads / a.kv_heads;
    const int group_rows = group * L;
    const int tiles = (group_rows + kTile - 1) / kTile;
    const int chunks = (tiles + a.tiles_per_block - 1) / a.tiles_per_block;
    const int kv_head = blockIdx.y / chunks;
    const int tile0 = (blockIdx.y - kv_head * chunks) * a.tiles_per_block;
    const int block_tiles = min(a.tiles_per_block, tiles - tile0);  // <= the block's warps: one per warp
    const int g0 = tile0 * kTile;  // the block's first query row in the group
    const int g_end = min(g0 + block_tiles * kTile, group_rows);
    const int64_t width = static_cast<int64_t>(a.q_heads + 2 * a.kv_heads) * D;
    const T* rows = static_cast<const T*>(a.qkv) + seq * L * width;
    const T* k_src = rows + static_cast<int64_t>(a.q_heads + kv_head) * D;
    const T* v_src = rows + static_cast<int64_t>(a.q_heads + a.kv_heads + kv_head) * D;
    const T* q_src = rows + static_cast<int64_t>(kv_head * group) * D;
    // Rows go through fp32 registers when they are rotated or scaled, else straight to shared memory.
    const bool convert = SCALED || a.cos != nullptr;

    // Before the programmatic wait, nothing that reads what the kernel before this one writes: the
    // zero rows (keys and values past the sequence: probability 0 times 0; query rows of the last
    // tile past the group, never stored) and the statistic from the norm's input (final before the
    // qkv GEMM started), with the barrier the staging needs behind it.
    for (int i = threadIdx.x; i < (TPAD - L) * ROW_VECS; i += blockDim.x) {
        const int t = L + i / ROW_VECS;
        const int e = (i % ROW_VECS) * VEC;
        *reinterpret_cast<uint4*>(ks + t * LD + e) = make_uint4(0u, 0u, 0u, 0u);
        *reinterpret_cast<uint4*>(vs + t * LD + e) = make_uint4(0u, 0u, 0u, 0u);
    }
    for (int i = threadIdx.x; i < (g0 + block_tiles * kTile - g_end) * ROW_VECS; i += blockDim.x) {
        const int r = i / ROW_VECS;
        *reinterpret_cast<uint4*>(qs + (g_end - g0 + r) * LD + (i - r * ROW_VECS) * VEC) = make_uint4(0u, 0u, 0u, 0u);
    }
    if constexpr (SCALES == kInputScales) {
        norm_scales<T>(a, seq, key_scale);
        if (threadIdx.x >= L && threadIdx.x < TPAD) key_scale[threadIdx.x] = 0.f;
        __syncthreads();  // the staging reads every token's scale
    }
    pdl_wait();

    // V by asynchronous copies, in flight while the rotated rows below are staged.
    if constexpr (SCALES == kGivenScales) {  // read after the block's barrier, by the probabilities of V's rows
        if (threadIdx.x < TPAD)
            key_scale[threadIdx.x] = threadIdx.x < L ? __ldg(a.row_scale + seq * L + threadIdx.x) : 0.f;
    }
    for (int i = threadIdx.x; i < L * ROW_VECS; i += blockDim.x) {
        const int t = i / ROW_VECS;
        const int e = (i - t * ROW_VECS) * VEC;
        copy_async16(vs + t * LD + e, v_src + t * width + e);
    }

    // The rows a block stages for token t (its key row and that token's row of each query head in
    // the block's tiles) are scaled and rotated by one row scale and one table row. A thread takes
    // one 16-byte piece pair (dims e.., e + D/2..) of up to kStageSlots of them: it loads the pieces
    // and the table's piece together and stores the rotated rows after one memory round trip, where
    // a thread per row piece would wait for each piece's table loads in turn (registers do not hold
    // them all at once). Query rows are head-major, token-minor within the group, so token t's rows
    // are L apart from the first at or after g0. V's scale goes into the probabilities.
    const int slots = a.stage_slots;
    uint4* const words = reinterpret_cast<uint4*>(shared_raw);  // ks, vs and qs as 16-byte words
    const int items = stage_items(L, PAIR_VECS, by_len(g_end - g0 + L - 1, a).head, slots);
    const auto stage = [&](auto converting) {
        for (int i = threadIdx.x; i < items; i += blockDim.x) {
            const int rest = i / PAIR_VECS;
            const int e = (i - rest * PAIR_VECS) * VEC;
            const HeadToken ct = by_len(rest, a);  // (slot chunk, token)
            const int t = ct.token;
            const int head0 = by_len(g0 + L - 1 - t, a).head;  // the first query head with a row of t in the block
            uint4 x[kStageSlots][2];
            int dst[kStageSlots];  // in 16-byte words from ks (uint4 indexing keeps the stores 16-byte ones)
#pragma unroll
            for (int b = 0; b < kStageSlots; ++b) {
                const int slot = ct.head * slots + b;  // 0: the key row, then query heads from head0
                const int g = t + (head0 + slot - 1) * L;
                dst[b] = b >= slots ? -1
                         : slot == 0 ? t * (LD / VEC)
                         : g < g_end ? (2 * TPAD + g - g0) * (LD / VEC) : -1;
                if (dst[b] >= 0) {
                    const T* row = (slot == 0 ? k_src : q_src + (head0 + slot - 1) * D) + t * width + e;
                    x[b][0] = __ldcg(reinterpret_cast<const uint4*>(row));  // L2 only, as cp.async.cg
                    x[b][1] = __ldcg(reinterpret_cast<const uint4*>(row + HALF));
                }
            }
            if constexpr (decltype(converting)::value) {
                float c1[VEC], s1[VEC], c2[VEC], s2[VEC];
                const bool rotate = a.cos != nullptr;
                if (rotate) {
                    load_f32<VEC, true>(a.cos + t * D + e, c1);
                    load_f32<VEC, true>(a.sin + t * D + e, s1);
                    load_f32<VEC, true>(a.cos + t * D + e + HALF, c2);
                    load_f32<VEC, true>(a.sin + t * D + e + HALF, s2);
                }
                [[maybe_unused]] float factor = 1.f;
                if constexpr (SCALES == kInputScales) factor = key_scale[t];
                if constexpr (SCALES == kGivenScales) factor = __ldg(a.row_scale + seq * L + t);
#pragma unroll
                for (int b = 0; b < kStageSlots; ++b) {
                    if (dst[b] < 0) continue;
                    float x1[VEC], x2[VEC];
                    unpack_piece<T>(x[b][0], x1);
                    unpack_piece<T>(x[b][1], x2);
#pragma unroll
                    for (int v = 0; v < VEC; ++v) {
                        if constexpr (SCALED) {
                            x1[v] *= factor;
                            x2[v] *= factor;
                        }
                        if (rotate) rope_pair(x1[v], x2[v], c1[v], s1[v], c2[v], s2[v]);
                    }
                    words[dst[b] + e / VEC] = pack_piece<T>(x1);
                    words[dst[b] + (e + HALF) / VEC] = pack_piece<T>(x2);
                }
            } else {
#pragma unroll
                for (int b = 0; b < kStageSlots; ++b) {
                    if (dst[b] < 0) continue;
                    words[dst[b] + e / VEC] = x[b][0];
                    words[dst[b] + (e + HALF) / VEC] = x[b][1];
                }
            }
        }
    };
    if (convert) {
        stage(std::true_type{});
    } else {
        stage(std::false_type{});
    }
    wait_async_copies();
    __syncthreads();  // the block's only barrier: the warps without a tile may leave after it
    if (warp >= block_tiles) return;

    const int tile = tile0 + warp;
    T* tile_smem = qs + warp * kTile * LD;
    const int g = lane >> 2;
    const int q4 = lane & 3;

    float s[KEY_TILES][4];
#pragma unroll
    for (int j = 0; j < KEY_TILES; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int k = 0; k < D; k += 16) {
        uint32_t q_frag[4];
        ldmatrix_x4(q_frag, tile_smem + (lane & 15) * LD + k + (lane >> 4) * 8);
#pragma unroll
        for (int j = 0; j < KEY_TILES; j += 2) {
            // Key tiles j and j + 1, dims k.. and k + 8..: K's rows are the column-major B operand.
            uint32_t k_frag[4];
            ldmatrix_x4(k_frag, ks + (j * 8 + (lane >> 4) * 8 + (lane & 7)) * LD + k + ((lane >> 3) & 1) * 8);
            Mma<T>::run(s[j], q_frag, k_frag[0], k_frag[1]);
            Mma<T>::run(s[j + 1], q_frag, k_frag[2], k_frag[3]);
        }
    }

    // Softmax of rows g and g + 8 of the tile; a row's logits are spread over one lane quad.
    const int t_lo = by_len(min(tile * kTile + g, group_rows - 1), a).token;
    const int t_hi = by_len(min(tile * kTile + g + 8, group_rows - 1), a).token;
    float max_lo = -INFINITY, max_hi = -INFINITY;
#pragma unroll
    for (int j = 0; j < KEY_TILES; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const int key = j * 8 + 2 * q4 + c;
            const bool live = key < L;
            s[j][c] = live && (!a.causal || key <= t_lo) ? s[j][c] * a.scale_log2 : -INFINITY;
            s[j][2 + c] = live && (!a.causal || key <= t_hi) ? s[j][2 + c] * a.scale_log2 : -INFINITY;
            max_lo = fmaxf(max_lo, s[j][c]);
            max_hi = fmaxf(max_hi, s[j][2 + c]);
        }
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
        max_lo = fmaxf(max_lo, __shfl_xor_sync(0xffffffffu, max_lo, off));
        max_hi = fmaxf(max_hi, __shfl_xor_sync(0xffffffffu, max_hi, off));
    }
    float sum_lo = 0.f, sum_hi = 0.f;  // key 0 is always live: both maxima are finite
#pragma unroll
    for (int j = 0; j < KEY_TILES; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            s[j][c] = exp2f(s[j][c] - max_lo);
            s[j][2 + c] = exp2f(s[j][2 + c] - max_hi);
            sum_lo += s[j][c];
            sum_hi += s[j][2 + c];
        }
#pragma unroll
    for (int off = 1; off < 4; off <<= 1) {
        sum_lo += __shfl_xor_sync(0xffffffffu, sum_lo, off);
        sum_hi += __shfl_xor_sync(0xffffffffu, sum_hi, off);
    }

    // Scaled values: sum_j p_j (s_j v_j) = sum_j (p_j s_j) v_j, so the probabilities take the keys'
    // row scales after the normaliser was summed (staged as 0 past the sequence, where p = 0 too).
    if constexpr (SCALED) {
#pragma unroll
        for (int j = 0; j < KEY_TILES; ++j)
#pragma unroll
            for (int c = 0; c < 2; ++c) {
                const float factor = key_scale[j * 8 + 2 * q4 + c];
                s[j][c] *= factor;
                s[j][2 + c] *= factor;
            }
    }

    float o[OUT_TILES][4];
#pragma unroll
    for (int j = 0; j < OUT_TILES; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.f;
#pragma unroll
    for (int kt = 0; kt < KEY_TILES; kt += 2) {
        uint32_t p_hi[4], p_lo[4];
        split_pair<T>(s[kt][0], s[kt][1], p_hi[0], p_lo[0]);
        split_pair<T>(s[kt][2], s[kt][3], p_hi[1], p_lo[1]);
        split_pair<T>(s[kt + 1][0], s[kt + 1][1], p_hi[2], p_lo[2]);
        split_pair<T>(s[kt + 1][2], s[kt + 1][3], p_hi[3], p_lo[3]);
#pragma unroll
        for (int j = 0; j < OUT_TILES; j += 2) {
            // Keys kt * 8.. and kt * 8 + 8.. of dim tiles j and j + 1: V's rows, transposed.
            uint32_t v_frag[4];
            ldmatrix_x4_trans(v_frag, vs + (kt * 8 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD + (j + (lane >> 4)) * 8);
            Mma<T>::run(o[j], p_hi, v_frag[0], v_frag[1]);
            Mma<T>::run(o[j], p_lo, v_frag[0], v_frag[1]);
            Mma<T>::run(o[j + 1], p_hi, v_frag[2], v_frag[3]);
            Mma<T>::run(o[j + 1], p_lo, v_frag[2], v_frag[3]);
        }
    }

    // Normalised rows through shared memory, so each output row leaves as 16-byte stores.
    __syncwarp();  // every lane's ldmatrix of the query tile is done
    const float inv_lo = 1.f / sum_lo;
    const float inv_hi = 1.f / sum_hi;
#pragma unroll
    for (int j = 0; j < OUT_TILES; ++j) {
        *reinterpret_cast<uint32_t*>(tile_smem + g * LD + j * 8 + 2 * q4) =
            Mma<T>::pack(o[j][0] * inv_lo, o[j][1] * inv_lo);
        *reinterpret_cast<uint32_t*>(tile_smem + (g + 8) * LD + j * 8 + 2 * q4) =
            Mma<T>::pack(o[j][2] * inv_hi, o[j][3] * inv_hi);
    }
    __syncwarp();
    // Each lane stores one 16-byte column of every RSTEP-th row; a row's (head, token) is carried to
    // the next by adding RSTEP tokens, not divided out of the row index again.
    constexpr int RSTEP = 32 / ROW_VECS;
    static_assert(32 % ROW_VECS == 0 && kTile % RSTEP == 0, "unsupported tile");
    const int e = (lane % ROW_VECS) * VEC;
    const int first = lane / ROW_VECS;
    int row = tile * kTile + first;
    const HeadToken start = by_len(row, a);
    int token = start.token;
    const int64_t token_stride = static_cast<int64_t>(a.q_heads) * D;
    T* dst = static_cast<T*>(a.out) + (seq * L + token) * token_stride + (kv_head * group + start.head) * D + e;
#pragma unroll
    for (int k = 0; k < kTile / RSTEP; ++k) {
        if (row < group_rows)
            *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(tile_smem + (first + k * RSTEP) * LD + e);
        row += RSTEP;
        token += RSTEP;
        dst += RSTEP * token_stride;
        while (token >= L) {  // the next head's first tokens
            token -= L;
            dst += D - L * token_stride;
        }
    }
}

size_t mma_shared_bytes(int head_dim, int tpad, int tiles_per_block, bool scaled) {
    const size_t ld = static_cast<size_t>(head_dim) + 8;
    const size_t rows = (2 * static_cast<size_t>(tpad) + static_cast<size_t>(kTile) * tiles_per_block) * ld * 2;
    return rows + (scaled ? tpad * sizeof(float) : 0);
}

template <typename T, int D, int TPAD, int SCALES>
int launch_mma_kernel(const ShortArgs& a, int64_t sequences, int chunks, int warps, cudaStream_t stream) {
    const size_t bytes = mma_shared_bytes(D, TPAD, a.tiles_per_block, SCALES != kNoScales);
    if (bytes > 48 * 1024) {  // opt in above the default limit (a host-side setting, fine during capture)
        const int err = static_cast<int>(cudaFuncSetAttribute(short_attention_mma_kernel<T, D, TPAD, SCALES>,
                                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                              static_cast<int>(bytes)));
        if (err != 0) return err;
    }
    const dim3 grid(static_cast<unsigned>(sequences), a.kv_heads * chunks);
    return launch_kernel(short_attention_mma_kernel<T, D, TPAD, SCALES>, grid, dim3(32 * warps), bytes, stream, a);
}

template <typename T, int D, int TPAD>
int launch_mma(const ShortArgs& a, int64_t sequences, int chunks, int warps, cudaStream_t stream) {
    const int source = a.norm_input != nullptr ? kInputScales : a.row_scale != nullptr ? kGivenScales : kNoScales;
    if (source == kInputScales) return launch_mma_kernel<T, D, TPAD, kInputScales>(a, sequences, chunks, warps, stream);
    if (source == kGivenScales) return launch_mma_kernel<T, D, TPAD, kGivenScales>(a, sequences, chunks, warps, stream);
    return launch_mma_kernel<T, D, TPAD, kNoScales>(a, sequences, chunks, warps, stream);
}

template <typename T>
int launch_mma_for_shape(const ShortArgs& a, int64_t sequences, int head_dim, int chunks, int warps,
                         cudaStream_t stream) {
    if (head_dim == 64)
        return a.seq_len <= 16 ? launch_mma<T, 64, 16>(a, sequences, chunks, warps, stream)
                               : launch_mma<T, 64, 32>(a, sequences, chunks, warps, stream);
    return a.seq_len <= 16 ? launch_mma<T, 128, 16>(a, sequences, chunks, warps, stream)
                           : launch_mma<T, 128, 32>(a, sequences, chunks, warps, stream);
}

// Query tiles per block: a KV head's whole group when that still puts a block on every
// multiprocessor (K and V staged once for all its tiles), else the group split into
// more chunks; never more tiles than warps.
int tiles_per_block(int64_t sequences, int q_heads, int kv_heads, int seq_len, int sms) {
    const int tiles = ((q_heads / kv_heads) * seq_len + kTile - 1) / kTile;
    for (int chunks = (tiles + kMmaWarps - 1) / kMmaWarps; chunks < tiles; ++chunks) {
        const int per = (tiles + chunks - 1) / chunks;
        if (sequences * kv_heads * ((tiles + per - 1) / per) >= sms) return per;
    }
    return 1;
}

// Rows of a token a staging thread takes: the fewest that leave each of `threads` at most one item,
// so that its arithmetic stays short where threads are plenty (one stream: 2), else kStageSlots.
int stage_slots(int seq_len, int pair_vecs, int query_rows, int threads) {
    for (int slots = 1; slots < kStageSlots; ++slots)
        if (stage_items(seq_len, pair_vecs, query_rows, slots) <= threads) return slots;
    return kStageSlots;
}

struct MmaBlock {
    int warps, stage_slots;
};

// Warps of a tensor-core block and its staging threads' rows. A grid of more than two blocks per
// multiprocessor gets one warp per tile (at least kMmaMinWarps, for the staging): 3 blocks of 6 warps
// then share a multiprocessor where 2 of 8 would. A smaller grid keeps at least 8 warps: on an H200
// its smaller blocks measured slower behind another kernel under programmatic dependent launch
// (64-256 sequences of 11 tokens), as if the blocks started early packed onto the multiprocessors
// the previous kernel left free; and up to kMaxStageWarps where that gives each staging thread one
// item (64 streams: 264 items, 9 warps).
MmaBlock mma_block(int64_t blocks, int tiles_per_block, int seq_len, int pair_vecs, int query_rows, int sms) {
    if (blocks > 2 * static_cast<int64_t>(sms)) {
        const int warps = std::max(tiles_per_block, kMmaMinWarps);
        return {warps, stage_slots(seq_len, pair_vecs, query_rows, warps * 32)};
    }
    int slots = stage_slots(seq_len, pair_vecs, query_rows, kMmaWarps * 32);
    if (stage_items(seq_len, pair_vecs, query_rows, slots) > kMmaWarps * 32)
        slots = stage_slots(seq_len, pair_vecs, query_rows, kMaxStageWarps * 32);
    const int items = stage_items(seq_len, pair_vecs, query_rows, slots);
    return {std::clamp((items + 31) / 32, kMmaWarps, kMaxStageWarps), slots};
}

// Query heads per block: the whole group sharing a KV head (K/V staged once for all of them) unless
// that leaves fewer than ~2 blocks (16 warps) per multiprocessor, then fewer heads so small batches
// spread out.
int heads_per_block(int64_t sequences, int q_heads, int kv_heads, int sms) {
    const int group = q_heads / kv_heads;
    const int64_t target = 2 * static_cast<int64_t>(sms);
    for (int h = group; h > 1; --h)
        if (group % h == 0 && sequences * (q_heads / h) >= target) return h;
    return 1;
}

}  // namespace
}  // namespace voxcpm

extern "C" int voxcpm_short_attention(const void* qkv, const float* cos, const float* sin, int64_t table_len,
                                      const float* row_scale, const void* norm_input, int64_t hidden, float eps,
                                      void* out, int64_t sequences, int seq_len,
                                      int q_heads, int kv_heads, int head_dim, float scale, int causal, int dtype,
                                      void* stream) {
    using namespace voxcpm;
    if (sequences < 0 || sequences > 0x7fffffff || seq_len < 1 || seq_len > kMaxLen || q_heads <= 0 ||
        q_heads > 65535 || kv_heads <= 0 || q_heads % kv_heads != 0 || (head_dim != 64 && head_dim != 128))
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if ((cos == nullptr) != (sin == nullptr) || (cos != nullptr && table_len < seq_len))
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (qkv == nullptr || out == nullptr || !aligned16(qkv) || !aligned16(out) ||
        (cos != nullptr && (!aligned16(cos) || !aligned16(sin))))
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (norm_input != nullptr && (row_scale != nullptr || hidden <= 0 || hidden > 16384))
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (sequences == 0) return 0;
    int sms = 0;
    int major = 0;
    int err = current_device_attribute(cudaDevAttrMultiProcessorCount, &sms);
    if (err == 0) err = current_device_attribute(cudaDevAttrComputeCapabilityMajor, &major);
    if (err != 0) return err;

    ShortArgs a{};
    a.qkv = qkv;
    a.cos = cos;
    a.sin = sin;
    a.row_scale = row_scale;
    a.norm_input = norm_input;
    a.hidden = static_cast<int>(hidden);
    a.eps = eps;
    a.out = out;
    a.seq_len = seq_len;
    a.q_heads = q_heads;
    a.kv_heads = kv_heads;
    a.heads_per_block = heads_per_block(sequences, q_heads, kv_heads, sms);
    a.tiles_per_block = tiles_per_block(sequences, q_heads, kv_heads, seq_len, sms);
    a.scale_log2 = scale * kLog2e;
    a.causal = causal != 0;
    a.len_magic = seq_len > 1 ? static_cast<uint32_t>(((uint64_t{1} << 32) + seq_len - 1) / seq_len) : 0u;
    const int tiles = ((q_heads / kv_heads) * seq_len + kTile - 1) / kTile;
    const int chunks = (tiles + a.tiles_per_block - 1) / a.tiles_per_block;
    if (static_cast<int64_t>(kv_heads) * chunks > 65535) return VOXCPM_ERROR_INVALID_ARGUMENT;
    const int block_rows = std::min(a.tiles_per_block * kTile, (q_heads / kv_heads) * seq_len);
    const MmaBlock block = mma_block(sequences * kv_heads * chunks, a.tiles_per_block, seq_len, head_dim / 16,
                                     (block_rows + seq_len - 1) / seq_len, sms);
    a.stage_slots = block.stage_slots;
    const int warps = block.warps;
    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        a.norm_vectors = norm_input != nullptr && row_vectors<T>(norm_input, hidden);
        if constexpr (!std::is_same_v<T, float>) {
            if (major >= 8) return launch_mma_for_shape<T>(a, sequences, head_dim, chunks, warps, s);
        }
        if (head_dim == 64) return launch_for_length<T, 64>(a, sequences, s);
        return launch_for_length<T, 128>(a, sequences, s);
    });
}
