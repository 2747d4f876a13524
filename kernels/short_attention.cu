// Whole-sequence attention over short sequences (LocEnc, LocDiT: at most 32 tokens), read straight
// from the fused qkv projection output, RoPE included, output written in o_proj's [tokens, Hq * d]
// layout. One block serves `heads_per_block` query heads of one sequence that share one KV head: it
// stages that head's K (rotated, rounded to the element type as the reference does) and V in shared
// memory as fp32. A warp then serves R = 32 / TP query rows at once, TP >= seq_len lanes per row:
// for the logits lane c of a row owns key c (one dot product over d from shared memory, no
// shuffles); for the output it owns every TP-th vector of the row.
#include <math.h>

#include "common.cuh"

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
    void* out;
    int seq_len, q_heads, kv_heads, heads_per_block;
    float scale_log2;  // softmax scale folded with log2(e): exp2 replaces exp
    int causal;
};

template <int N>
__device__ __forceinline__ void load_f32(const float* p, float (&out)[N]) {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
        const float4 v = *reinterpret_cast<const float4*>(p + i);
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

// Loads VEC rotate-half pairs (dims e.., e + D/2..) of one head row, rotates them by table row `t`
// (when tables are given) and stores them, rounded to T like apply_rope's result, to `dst` (fp32).
// Products are rounded on their own (no fused multiply-add), as the reference's fp32 expression is.
template <typename T, int D, int VEC>
__device__ __forceinline__ void stage_rotated(const T* src, float* dst, const float* cos, const float* sin, int t,
                                              int e) {
    constexpr int HALF = D / 2;
    float x1[VEC], x2[VEC];
    load_vec<T, VEC>(src + e, x1);
    load_vec<T, VEC>(src + e + HALF, x2);
    if (cos != nullptr) {
        float c1[VEC], s1[VEC], c2[VEC], s2[VEC];
        load_f32<VEC>(cos + t * D + e, c1);
        load_f32<VEC>(sin + t * D + e, s1);
        load_f32<VEC>(cos + t * D + e + HALF, c2);
        load_f32<VEC>(sin + t * D + e + HALF, s2);
#pragma unroll
        for (int i = 0; i < VEC; ++i) {
            const float y1 = __fadd_rn(__fmul_rn(x1[i], c1[i]), __fmul_rn(-x2[i], s1[i]));
            const float y2 = __fadd_rn(__fmul_rn(x2[i], c2[i]), __fmul_rn(x1[i], s2[i]));
            x1[i] = round_to<T>(y1);
            x2[i] = round_to<T>(y2);
        }
    }
    store_f32<VEC>(dst + e, x1);
    store_f32<VEC>(dst + e + HALF, x2);
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

    const int L = a.seq_len;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int64_t seq = blockIdx.x;
    const int head0 = blockIdx.y * a.heads_per_block;
    const int kv_head = head0 / (a.q_heads / a.kv_heads);
    const int64_t width = static_cast<int64_t>(a.q_heads + 2 * a.kv_heads) * D;
    const T* rows = static_cast<const T*>(a.qkv) + seq * L * width;
    float* qs = vs + L * D + warp * R * KS;  // this warp's [R][KS] rotated query rows

    const T* k_src = rows + static_cast<int64_t>(a.q_heads + kv_head) * D;
    for (int i = threadIdx.x; i < L * PAIR_VECS; i += kThreads) {
        const int t = i / PAIR_VECS;
        stage_rotated<T, D, VEC>(k_src + t * width, ks + t * KS, a.cos, a.sin, t, (i - t * PAIR_VECS) * VEC);
    }
    const T* v_src = rows + static_cast<int64_t>(a.q_heads + a.kv_heads + kv_head) * D;
    for (int i = threadIdx.x; i < L * (D / VEC); i += kThreads) {
        const int t = i / (D / VEC);
        const int e = (i - t * (D / VEC)) * VEC;
        float x[VEC];
        load_vec<T, VEC>(v_src + t * width + e, x);
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
            const int t = row % L;
            const T* q_src = rows + t * width + static_cast<int64_t>(head0 + row / L) * D;
            stage_rotated<T, D, VEC>(q_src, qs + r * KS, a.cos, a.sin, t, (i - r * PAIR_VECS) * VEC);
        }
        __syncwarp();

        const int row = base + sub;
        const int t = min(row, block_rows - 1) % L;
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
                     ((seq * L + t) * a.q_heads + head0 + row / L) * static_cast<int64_t>(D) + col * VW;
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
                            static_cast<size_t>(kWarps) * r * (D + kPad));
}

template <typename T, int D, int TP>
int launch(const ShortArgs& a, int64_t sequences, cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>(sequences), a.q_heads / a.heads_per_block);
    short_attention_kernel<T, D, TP><<<grid, kThreads, shared_bytes<D>(a.seq_len, TP), stream>>>(a);
    return launch_status();
}

template <typename T, int D>
int launch_for_length(const ShortArgs& a, int64_t sequences, cudaStream_t stream) {
    if (a.seq_len <= 4) return launch<T, D, 4>(a, sequences, stream);
    if (a.seq_len <= 8) return launch<T, D, 8>(a, sequences, stream);
    if (a.seq_len <= 16) return launch<T, D, 16>(a, sequences, stream);
    return launch<T, D, 32>(a, sequences, stream);
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
                                      void* out, int64_t sequences, int seq_len, int q_heads, int kv_heads,
                                      int head_dim, float scale, int causal, int dtype, void* stream) {
    using namespace voxcpm;
    if (sequences < 0 || sequences > 0x7fffffff || seq_len < 1 || seq_len > kMaxLen || q_heads <= 0 ||
        q_heads > 65535 || kv_heads <= 0 || q_heads % kv_heads != 0 || (head_dim != 64 && head_dim != 128))
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if ((cos == nullptr) != (sin == nullptr) || (cos != nullptr && table_len < seq_len))
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (qkv == nullptr || out == nullptr || !aligned16(qkv) || !aligned16(out) ||
        (cos != nullptr && (!aligned16(cos) || !aligned16(sin))))
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (sequences == 0) return 0;
    int device = 0;
    int sms = 0;
    int err = static_cast<int>(cudaGetDevice(&device));
    if (err == 0) err = static_cast<int>(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    if (err != 0) return err;

    ShortArgs a{};
    a.qkv = qkv;
    a.cos = cos;
    a.sin = sin;
    a.out = out;
    a.seq_len = seq_len;
    a.q_heads = q_heads;
    a.kv_heads = kv_heads;
    a.heads_per_block = heads_per_block(sequences, q_heads, kv_heads, sms);
    a.scale_log2 = scale * kLog2e;
    a.causal = causal != 0;
    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        if (head_dim == 64) return launch_for_length<T, 64>(a, sequences, s);
        return launch_for_length<T, 128>(a, sequences, s);
    });
}
