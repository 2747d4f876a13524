// GEMM for a handful of activation rows against a large weight: out = x @ w^T with x [m <= 32, k].
//
// At one stream every linear layer of the step has 1 (LM decode) to 22 (LocDiT with both CFG
// branches) rows, so its cost is streaming the weight once. cuBLAS picks 64x8-style tiles for these
// shapes and lands 2-3x below memory bandwidth; this kernel is built for the shape instead:
//  - the weight is the tensor-core A operand (16 weight rows x 16 k per mma.m16n8k16) and the
//    activation rows the B operand (8 per n-tile), so m pads only to a multiple of 8;
//  - every thread loads 8 consecutive k of a row with one 16-byte load. The mma's k order is
//    permuted identically for both operands (a dot product does not care about the order), so the
//    loaded words feed the fragments directly, with no shared-memory staging;
//  - a block owns two 16-row weight tiles over a slice of k, its 8 warps interleave over that
//    slice's 32-wide k chunks, and the slices are summed in a fixed order by the block that finishes
//    last (a counter per tile pair), so the result is deterministic and one launch does it all;
//  - the SwiGLU epilogue pairs gate rows [r, r + 16) with up rows [inter + r, inter + r + 16) of a
//    fused [gate; up] weight and writes silu(gate) * up: the gate_up output never reaches memory;
//  - two more options let a decoder layer drop its two add_rmsnorm kernels. The RMSNorm of x
//    becomes part of the GEMM, since norm(x) @ w^T = rsqrt(mean(x^2) + eps) * ((x * gain) @ w^T)
//    row by row: the activation words are multiplied by the gain as they are loaded, the squares
//    of x are summed from the same words (every k of a row passes through exactly one warp of each
//    block column, so the splits' sums give the whole row) and the epilogue scales the rows. The
//    residual add writes residual + scale * out, in place when out is the residual; with a
//    residual of one row for all rows, the same epilogue adds a layer's bias;
//  - on Hopper the splits of a pair run as one thread block cluster and are summed through
//    distributed shared memory: each block pushes every peer's slice of the outputs into that
//    peer's shared memory (st.async on an mbarrier, kernels/cluster_exchange.cuh), then sums its
//    own slice in split order and writes it. The global-memory path (partials, a fence, a counter,
//    the last block reading them back) costs several L2 round trips on the kernel's critical
//    path (perf/RESULTS.md run 22: 4.6 against 6.6 us for the LocDiT's qkv at one stream, with
//    the cluster path as it was then, two cluster barriers and reads of the peers' memory; the
//    push took another 0.4-0.7 us off four-split calls, run 123). Deterministic too; with the
//    same split count it sums in the same order as the global path.
//  - launched as a programmatic dependent (kernels/common.cuh), each warp issues its first weight
//    loads before waiting for the kernel before it, so the weight streams while that kernel drains
//    (at one stream nearly every warp has a single round of chunks: all its weight loads go early).
//    The weight (and the norm's gain) must therefore not be written by the kernels just before on
//    the stream.
#include "cluster_exchange.cuh"
#include "common.cuh"
#include "mma.cuh"

namespace voxcpm {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kChunk = 32;  // k values per chunk: 4 threads x 8 elements
constexpr int kMaxRows = 32;
constexpr int kMaxSplits = 16;
constexpr int kMaxClusterSplits = 8;  // the portable cluster size

enum Epilogue { kPlain = 0, kSwiGLU = VOXCPM_SKINNY_SWIGLU };
constexpr int kRowRms = VOXCPM_SKINNY_ROW_RMS;
constexpr int kResidual = VOXCPM_SKINNY_RESIDUAL;
constexpr int kBias = VOXCPM_SKINNY_BIAS;  // with kResidual: the residual is one [n] row for every row
// The gain staged for ROW_RMS, as dynamic shared memory beside the 25-32-row form's 33808 static
// bytes: within the 48 KB a launch gets without opting in, k up to 7648 (at 8192 it fails to
// launch). ops/skinny_linear.py's NORM_MAX_K mirrors it.
constexpr int kMaxNormK = 7648;
constexpr int kRowSlots = 32;  // per-row sums of squares kept after the fragment values (kMaxRows)

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

template <typename T> __device__ __forceinline__ float2 unpack(uint32_t w);
template <> __device__ __forceinline__ float2 unpack<__nv_bfloat16>(uint32_t w) {
    return make_float2(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
}
template <> __device__ __forceinline__ float2 unpack<__half>(uint32_t w) {
    return __half22float2(*reinterpret_cast<const __half2*>(&w));
}

// The packed pair type of T, for __hmul2.
template <typename T> struct Packed;
template <> struct Packed<__nv_bfloat16> { using type = __nv_bfloat162; };
template <> struct Packed<__half> { using type = __half2; };

// The 8 elements of v times the 8 of gain, each product rounded to T (exact in fp32 before that).
template <typename T> __device__ __forceinline__ uint4 times(const uint4& v, const uint4& gain) {
    using P = typename Packed<T>::type;
    uint4 out;
    const auto* a = reinterpret_cast<const P*>(&v);
    const auto* b = reinterpret_cast<const P*>(&gain);
    auto* c = reinterpret_cast<P*>(&out);
#pragma unroll
    for (int i = 0; i < 4; ++i) c[i] = __hmul2(a[i], b[i]);
    return out;
}

template <typename T> __device__ __forceinline__ float sum_squares(const uint4& v) {
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float2 pair = unpack<T>(word(v, i));
        sum = fmaf(pair.x, pair.x, fmaf(pair.y, pair.y, sum));
    }
    return sum;
}

// Weights are read once per call: keep them out of L1 so the activations stay there.
__device__ __forceinline__ uint4 load_stream(const void* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

// Fragment value index v = ((tile * MT + ntile) * 4 + reg) * 32 + lane, the layout partial sums
// keep in shared memory and in the split workspace.
template <int MT> struct Frag {
    static constexpr int kValues = 2 * MT * 4 * 32;
    int tile, ntile, reg, lane;
    __device__ explicit Frag(int v) : tile(v / (MT * 128)), ntile((v / 128) % MT), reg((v / 32) % 4), lane(v % 32) {}
    __device__ int row() const { return (lane >> 2) + ((reg >> 1) << 3); }  // within the 16-row tile
    __device__ int token() const { return ntile * 8 + (lane & 3) * 2 + (reg & 1); }
};

// Outputs of a pair (fragment values; half of them for SwiGLU, whose up half joins the gate's).
template <int MT, int EPI> __host__ __device__ constexpr int pair_outputs() {
    return EPI == kSwiGLU ? Frag<MT>::kValues / 2 : Frag<MT>::kValues;
}

// Values a thread of a cluster's block receives from each sender: its share of the outputs, both
// halves for SwiGLU. The kernel lays out its exchange area by it, launch_tiles sizes the area by it.
template <int MT, int EPI> __host__ __device__ constexpr int exchange_slots(int splits) {
    const int per_thread = (pair_outputs<MT, EPI>() + splits * kThreads - 1) / (splits * kThreads);
    return EPI == kSwiGLU ? 2 * per_thread : per_thread;
}

// grid (pairs, splits); pair p owns weight rows [base, base + 16) and [base + second, base + second
// + 16) with base = p * 32, second = 16 (plain) or base = p * 16, second = inter (SwiGLU).
template <typename T, int MT, int U, int EPI>
__global__ void __launch_bounds__(kThreads, 2) skinny_gemm_kernel(
    const T* __restrict__ x, const T* __restrict__ w, T* out, const T* __restrict__ gain, const T* residual,
    float* __restrict__ partials, int* __restrict__ counters, int m, int k, int out_cols, int second, int options,
    float residual_scale, float rms_eps, bool cluster) {
    __shared__ float reduced[kWarps][Frag<MT>::kValues];
    __shared__ float row_squares[kWarps][kRowSlots];
    __shared__ bool last_block;
    __shared__ uint64_t exchanged;  // in a cluster: the peers' partial sums are in (cluster_exchange.cuh)
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int g = lane >> 2;
    const int t = lane & 3;
    const int splits = gridDim.y;
    const int split = blockIdx.y;
    const int base = EPI == kSwiGLU ? blockIdx.x * 16 : blockIdx.x * 32;
    const int chunks = k / kChunk;

    const T* rows[4] = {w + static_cast<size_t>(base + g) * k + t * 8, w + static_cast<size_t>(base + g + 8) * k + t * 8,
                        w + static_cast<size_t>(base + second + g) * k + t * 8,
                        w + static_cast<size_t>(base + second + g + 8) * k + t * 8};
    // Element offsets of this thread's activation pieces, as int (32 rows of k <= 2^24). Rows
    // past m read row 0 instead of zeros: they feed only tokens that are never stored. Both keep
    // the stretch between the wait and the activation loads short (the compiler computes the
    // addresses there): 64-bit offsets, predicates and zero fills made it 69-174 instructions
    // a warp, against 43-76 (cuobjdump, sm_90).
    int xoffsets[MT];
#pragma unroll
    for (int nt = 0; nt < MT; ++nt) {
        xoffsets[nt] = (nt * 8 + g < m ? nt * 8 + g : 0) * k + t * 8;
        asm volatile("" : "+r"(xoffsets[nt]));  // worked out here, not again after the wait
    }

    const bool row_rms = options & kRowRms;
    // The sums start at zero in registers set before the wait: left to the compiler, the zeroing
    // lands after it, ahead of the activation loads (the empty asm makes the zeros opaque, so it
    // cannot). Likewise the activation offsets above.
    float squares[MT];
#pragma unroll
    for (int nt = 0; nt < MT; ++nt) {
        squares[nt] = 0.f;
        asm volatile("" : "+f"(squares[nt]));
    }
    float acc[2][MT][4];
#pragma unroll
    for (int tl = 0; tl < 2; ++tl)
#pragma unroll
        for (int nt = 0; nt < MT; ++nt)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                acc[tl][nt][r] = 0.f;
                asm volatile("" : "+f"(acc[tl][nt][r]));
            }

    // This warp's chunks: split + splits * (warp + kWarps * i), U of them loaded before any is used.
    // Chunks past the end reload the round's first chunk (valid memory) and are skipped below.
    const int stride = splits * kWarps;
    int first = split + splits * warp;
    uint4 a[U][4];
    auto load_weights = [&](int round_first) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int c = round_first + u * stride;
            const size_t offset = static_cast<size_t>(c < chunks ? c : round_first) * kChunk;
#pragma unroll
            for (int q = 0; q < 4; ++q) a[u][q] = load_stream(rows[q] + offset);
        }
    };
    pdl_launch_dependents();
    if (first < chunks) load_weights(first);
    // The norm's gain, like the weight, is a parameter: staged before the wait, read from shared
    // memory in the loop (an L2 round trip per chunk there would serialise with the mma).
    extern __shared__ uint4 staged_gain[];
    if (row_rms) {
        for (int i = threadIdx.x; i < k / 8; i += kThreads) staged_gain[i] = __ldg(reinterpret_cast<const uint4*>(gain) + i);
        __syncthreads();
    }
    constexpr int kValues = Frag<MT>::kValues;
    constexpr int kRows = MT * 8;
    constexpr int kOutputs = pair_outputs<MT, EPI>();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    const bool in_cluster = cluster;  // the pair's splits (gridDim.y) are one cluster
#else
    const bool in_cluster = false;  // code built for older GPUs (a JIT from their PTX): the global path
#endif
    // The outputs this thread writes: in a cluster each block takes a slice of them, otherwise the
    // pair's last block writes all. At most kOutputs / kThreads <= MT each.
    const int first_output = in_cluster ? split * kThreads + threadIdx.x : threadIdx.x;
    const int output_step = in_cluster ? splits * kThreads : kThreads;
    // Where those outputs go, worked out before the wait: after it, this index arithmetic sat on
    // every call's critical path twice (residual reads, stores). One int each, to hold the registers
    // where two tiles already use all 128: token << 24 | column of out (n < 2^24), or -1 where
    // there is no output i or its token is past m.
    int out_slot[MT];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const int v = first_output + i * output_step;
        const Frag<MT> f(v < kOutputs ? v : 0);
        const int column = base + (EPI == kSwiGLU ? f.row() : f.tile * 16 + f.row());
        out_slot[i] = v < kOutputs && f.token() < m ? f.token() << 24 | column : -1;
    }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (in_cluster) {
        if (threadIdx.x == 0) exchange_init(&exchanged);
        cluster_sync_relaxed();  // before the wait: behind the kernel before, not after the loop
    }
#endif
    pdl_wait();
    for (; first < chunks; first += stride * U) {
        uint4 b[U][MT];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int c = first + u * stride;
            const int offset = (c < chunks ? c : first) * kChunk;
#pragma unroll
            for (int nt = 0; nt < MT; ++nt) b[u][nt] = __ldg(reinterpret_cast<const uint4*>(x + (xoffsets[nt] + offset)));
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (first + u * stride >= chunks) break;
            if (row_rms) {
                const uint4 g8 = staged_gain[((first + u * stride) * kChunk + t * 8) / 8];
#pragma unroll
                for (int nt = 0; nt < MT; ++nt) {
                    squares[nt] += sum_squares<T>(b[u][nt]);
                    b[u][nt] = times<T>(b[u][nt], g8);
                }
            }
            // Logical k {2t, 2t+1 | 2t+8, 2t+9} of mma j are physical 8t + 4j + {0, 1 | 2, 3}.
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int tl = 0; tl < 2; ++tl)
#pragma unroll
                    for (int nt = 0; nt < MT; ++nt)
                    {
                        const uint32_t frag[4] = {word(a[u][2 * tl], 2 * j), word(a[u][2 * tl + 1], 2 * j),
                                                  word(a[u][2 * tl], 2 * j + 1), word(a[u][2 * tl + 1], 2 * j + 1)};
                        Mma<T>::run(acc[tl][nt], frag, word(b[u][nt], 2 * j), word(b[u][nt], 2 * j + 1));
                    }
        }
        if (first + stride * U < chunks) load_weights(first + stride * U);
    }

    // The residual values those outputs add, read now so that the reduction hides the round trip;
    // outputs are written only after every block of the pair has read its own.
    float resid[MT];
    if (EPI == kPlain && (options & kResidual)) {
        const int row_stride = (options & kBias) ? 0 : out_cols;
#pragma unroll
        for (int i = 0; i < MT; ++i)
            resid[i] = out_slot[i] >= 0 ? to_float<T>(residual[(out_slot[i] >> 24) * row_stride + (out_slot[i] & 0xffffff)])
                                        : 0.f;
    }

#pragma unroll
    for (int tl = 0; tl < 2; ++tl)
#pragma unroll
        for (int nt = 0; nt < MT; ++nt)
#pragma unroll
            for (int r = 0; r < 4; ++r) reduced[warp][((tl * MT + nt) * 4 + r) * 32 + lane] = acc[tl][nt][r];
    if (row_rms) {
#pragma unroll
        for (int nt = 0; nt < MT; ++nt) {
            // The four lanes of a row hold different k; rows past m (copies of row 0) are never used.
            float sum = squares[nt] + __shfl_xor_sync(0xffffffffu, squares[nt], 1);
            sum += __shfl_xor_sync(0xffffffffu, sum, 2);
            if (t == 0) row_squares[warp][nt * 8 + g] = sum;
        }
    }
    __syncthreads();
    // kValues / kThreads (= MT) values a thread, as a count known at compile time: unrolled, their
    // loads issue together instead of one value's round trip after another's.
    static_assert(kValues % kThreads == 0, "fragment values fill whole passes of the block");
#pragma unroll
    for (int i = 0; i < kValues / kThreads; ++i) {
        const int v = threadIdx.x + i * kThreads;
        float sum = 0.f;
#pragma unroll
        for (int wi = 0; wi < kWarps; ++wi) sum += reduced[wi][v];
        reduced[0][v] = sum;  // each v is read and written by this thread only
    }
    if (row_rms && threadIdx.x < kRows) {
        float sum = 0.f;
#pragma unroll
        for (int wi = 0; wi < kWarps; ++wi) sum += row_squares[wi][threadIdx.x];
        row_squares[0][threadIdx.x] = sum;
    }

    // Writes output i of this thread (and its up half for SwiGLU) from its k sums.
    auto store = [&](int i, float sum, float up_sum) {
        if (out_slot[i] < 0) return;
        const int token = out_slot[i] >> 24;
        const float scale = row_rms ? row_squares[1][token] : 1.f;
        T* to = out + token * out_cols + (out_slot[i] & 0xffffff);
        if (EPI == kSwiGLU) {
            // Rounded like swiglu on a materialised gate_up output.
            const float gate = round_to<T>(sum * scale);
            const float up = round_to<T>(up_sum * scale);
            *to = from_float<T>(round_to<T>(silu(gate)) * up);
        } else {
            float value = sum * scale;
            if (options & kResidual) value = fmaf(residual_scale, value, resid[i]);
            *to = from_float<T>(value);
        }
    };
    // The row scale as rms_norm computes it (the mean of the squares in fp32, then rsqrt), kept in
    // row_squares[1] from whole-row sums in row_squares[0].
    auto row_scales = [&]() {
        if (row_rms && threadIdx.x < kRows) row_squares[1][threadIdx.x] = rsqrtf(row_squares[0][threadIdx.x] / k + rms_eps);
    };

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (in_cluster) {
        // Each block pushes to every peer the partial sums of the outputs that peer writes (and its
        // rows' sums of squares) into the peer's dynamic shared memory after the gain: [sender]
        // [value a thread][thread], then [sender][row]. It then waits until its own have all come,
        // and sums them in split order, as reading the peers' shared memory did: no cluster
        // barrier after the loop, and no block reads another's memory, so none waits to exit.
        const int slots = exchange_slots<MT, EPI>(splits);
        float* incoming = reinterpret_cast<float*>(staged_gain + (row_rms ? k / 8 : 0));
        float* incoming_rows = incoming + splits * slots * kThreads;
        if (threadIdx.x == 0) {
            int owned = 0;
#pragma unroll
            for (int i = 0; i < MT; ++i) owned += min(max(kOutputs - (split + i * splits) * kThreads, 0), kThreads);
            const int values = owned * (EPI == kSwiGLU ? 2 : 1) + (row_rms ? kRows : 0);
            exchange_expect_bytes(&exchanged, static_cast<uint32_t>((splits - 1) * values * sizeof(float)));
        }
        const uint32_t own_barrier = shared_address(&exchanged);
        const uint32_t own_incoming = shared_address(incoming);
#pragma unroll
        for (int s = 0; s < kMaxClusterSplits; ++s) {
            if (s >= splits || s == split) continue;
            const uint32_t barrier = peer_address(own_barrier, s);
            const uint32_t values = peer_address(own_incoming, s);
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                const int v = (s + i * splits) * kThreads + threadIdx.x;  // peer s's output i of this thread
                if (v >= kOutputs) continue;
                const int slot = (split * slots + (EPI == kSwiGLU ? 2 * i : i)) * kThreads + threadIdx.x;
                exchange_send(values + slot * sizeof(float), reduced[0][v], barrier);
                if (EPI == kSwiGLU) exchange_send(values + (slot + kThreads) * sizeof(float), reduced[0][v + kValues / 2], barrier);
            }
            if (row_rms && threadIdx.x < kRows) {
                const int slot = splits * slots * kThreads + split * kRows + threadIdx.x;
                exchange_send(values + slot * sizeof(float), row_squares[0][threadIdx.x], barrier);
            }
        }
        exchange_wait(&exchanged);
        float total_squares = 0.f;  // this thread's row (threadIdx.x < kRows) over the splits
        if (row_rms && threadIdx.x < kRows) {
#pragma unroll
            for (int s = 0; s < kMaxClusterSplits; ++s)
                if (s < splits)
                    total_squares += s == split ? row_squares[0][threadIdx.x] : incoming_rows[s * kRows + threadIdx.x];
        }
        float sums[MT], up_sums[MT];
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            const int v = first_output + i * output_step;
            sums[i] = up_sums[i] = 0.f;
            if (v >= kOutputs) continue;
            const int slot = (EPI == kSwiGLU ? 2 * i : i) * kThreads + threadIdx.x;
#pragma unroll
            for (int s = 0; s < kMaxClusterSplits; ++s) {
                if (s >= splits) continue;
                const float* from = incoming + s * slots * kThreads + slot;
                sums[i] += s == split ? reduced[0][v] : from[0];
                if (EPI == kSwiGLU) up_sums[i] += s == split ? reduced[0][v + kValues / 2] : from[kThreads];
            }
        }
        if (row_rms && threadIdx.x < kRows) row_squares[0][threadIdx.x] = total_squares;
        row_scales();
        __syncthreads();
#pragma unroll
        for (int i = 0; i < MT; ++i) store(i, sums[i], up_sums[i]);
        return;
    }
#endif

    if (splits > 1) {
        constexpr int kStride = kValues + kRowSlots;
        float* mine = partials + (static_cast<size_t>(blockIdx.x) * splits + split) * kStride;
        for (int v = threadIdx.x; v < kValues; v += kThreads) mine[v] = reduced[0][v];
        if (row_rms && threadIdx.x < kRows) mine[kValues + threadIdx.x] = row_squares[0][threadIdx.x];
        __threadfence();
        __syncthreads();
        if (threadIdx.x == 0) last_block = atomicAdd(&counters[blockIdx.x], 1) == splits - 1;
        __syncthreads();
        if (!last_block) return;
        __threadfence();
        const float* all = partials + static_cast<size_t>(blockIdx.x) * splits * kStride;
        for (int v = threadIdx.x; v < kValues; v += kThreads) {
            float sum = 0.f;
            for (int s = 0; s < splits; ++s) sum += __ldcg(all + static_cast<size_t>(s) * kStride + v);
            reduced[0][v] = sum;
        }
        if (row_rms && threadIdx.x < kRows) {
            float sum = 0.f;
            for (int s = 0; s < splits; ++s) sum += __ldcg(all + static_cast<size_t>(s) * kStride + kValues + threadIdx.x);
            row_squares[0][threadIdx.x] = sum;
        }
        if (threadIdx.x == 0) counters[blockIdx.x] = 0;  // ready for the next launch
    }
    row_scales();
    __syncthreads();
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        const int v = first_output + i * output_step;
        if (v < kOutputs) store(i, reduced[0][v], EPI == kSwiGLU ? reduced[0][v + kValues / 2] : 0.f);
    }
}

struct Shape {
    int pairs;
    int splits;
    int values;
    bool cluster;  // the splits of a pair are one thread block cluster, reduced in shared memory
};

int row_tiles(int m) { return (m + 7) / 8; }

// Two chunks in flight per warp when many activation rows need registers, four otherwise.
template <int MT> constexpr int unroll() { return MT > 2 ? 2 : 4; }

template <typename T, int MT, int EPI> auto kernel_of() {
    return skinny_gemm_kernel<T, MT, unroll<MT>(), EPI>;
}

template <int MT> int resident_blocks_of(int epilogue) {
    int blocks = 0;
    const cudaError_t error =
        epilogue == kSwiGLU
            ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel_of<__nv_bfloat16, MT, kSwiGLU>(), kThreads, 0)
            : cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel_of<__nv_bfloat16, MT, kPlain>(), kThreads, 0);
    return error == cudaSuccess ? std::max(blocks, 1) : 1;
}

// Blocks of one launch that fit on a multiprocessor at once (the fp16 twins use the same resources).
int resident_blocks(int m, int epilogue) {
    switch (row_tiles(m)) {
        case 1: return resident_blocks_of<1>(epilogue);
        case 2: return resident_blocks_of<2>(epilogue);
        case 3: return resident_blocks_of<3>(epilogue);
        default: return resident_blocks_of<4>(epilogue);
    }
}

// Blocks per multiprocessor the split plan fills: one, so that a slot stays free where the next
// kernel's blocks (launched early, as programmatic dependents) start streaming their weight while
// this kernel runs; filling both slots made the step at one stream 11% slower (perf/RESULTS.md
// run 23). VOXCPM_SKINNY_SPLIT_BLOCKS=N plans for N instead, 0 for all that fit (A/B timing).
int split_blocks_per_sm() {
    static const int blocks = [] {
        const char* value = getenv("VOXCPM_SKINNY_SPLIT_BLOCKS");
        if (value == nullptr) return 1;
        const int parsed = atoi(value);
        return parsed >= 1 ? parsed : 1 << 20;
    }();
    return blocks;
}

// Whether split pairs run as clusters: compute capability 9 or newer, unless the environment sets
// VOXCPM_SKINNY_CLUSTER=0 (A/B timing). Read once per process; the device is the current one.
bool clusters_enabled() {
    static const bool allowed = [] {
        const char* value = getenv("VOXCPM_SKINNY_CLUSTER");
        return value == nullptr || value[0] != '0';
    }();
    int major = 0;
    return allowed && current_device_attribute(cudaDevAttrComputeCapabilityMajor, &major) == cudaSuccess && major >= 9;
}

// Splits of k so the whole grid runs as one wave of one block per multiprocessor (a second,
// partial wave would double the time of these one-round-trip kernels), each split at least 4
// chunks; as clusters, at most 8. Those clusters fit in one wave without asking the driver: the
// plan takes half the two blocks per multiprocessor the registers allow, and a GPC of >= 16 of
// them holds 4 clusters of 8 at once. (cudaOccupancyMaxActiveClusters would say so too, but called
// while a stream is being captured it invalidated the capture: perf/RESULTS.md run 24.)
Shape plan(int m, int n, int k, int epilogue) {
    const int pairs = n / 32;  // 32 rows: two adjacent tiles, or one gate and one up tile
    const int chunks = k / kChunk;
    const int slots = std::min(resident_blocks(m, epilogue), split_blocks_per_sm()) * multiprocessors();
    const int splits = std::max(1, std::min({slots / std::max(pairs, 1), chunks / 4, kMaxSplits}));
    const int values = 2 * row_tiles(m) * 4 * 32 + kRowSlots;  // fragments, then row sums of squares
    if (splits == 1 || !clusters_enabled()) return {pairs, splits, values, false};
    return {pairs, std::min(splits, kMaxClusterSplits), values, true};
}

// Everything a launch passes besides the operands' pointers and the grid.
struct Args {
    const void* x;
    const void* w;
    void* out;
    const void* gain;
    const void* residual;
    float* partials;
    int* counters;
    int m, k, out_cols, second, options;
    float residual_scale, rms_eps;
};

// What the peers of a cluster push into a block's dynamic shared memory (the kernel's cluster path):
// every split's partial sums of the outputs the block writes, then every split's row sums.
template <int MT, int EPI> size_t exchange_bytes(int splits) {
    return static_cast<size_t>(splits) * (exchange_slots<MT, EPI>(splits) * kThreads + MT * 8) * sizeof(float);
}

// The kernel's static shared memory, at most: reduced, row_squares, last_block and the mbarrier.
// Summed by hand: a __shared__ variable added to the kernel must be added here (ptxas -v gives
// the real figure); as one struct sized by sizeof, gate_up ran 0.13-0.15 us slower (run 132).
template <int MT> constexpr size_t static_shared_bytes() {
    return kWarps * (Frag<MT>::kValues + kRowSlots) * sizeof(float) + 16;
}

template <typename T, int MT, int EPI> int launch_tiles(const Args& a, const Shape& shape, cudaStream_t stream) {
    const size_t gain_bytes = (a.options & kRowRms) ? static_cast<size_t>(a.k) * sizeof(T) : 0;
    // Within the 48 KB a launch gets without opting in. Where a norm's gain leaves no room for the
    // exchange (at four row tiles from k ~3000-5500, by split count), the splits sum through
    // global memory instead.
    const bool cluster = shape.cluster && static_shared_bytes<MT>() + gain_bytes + exchange_bytes<MT, EPI>(shape.splits) <=
                                              static_cast<size_t>(48 * 1024);
    return launch_kernel_in_clusters(
        kernel_of<T, MT, EPI>(), dim3(shape.pairs, shape.splits), dim3(kThreads),
        gain_bytes + (cluster ? exchange_bytes<MT, EPI>(shape.splits) : 0), dim3(1, cluster ? shape.splits : 1), stream,
        static_cast<const T*>(a.x), static_cast<const T*>(a.w), static_cast<T*>(a.out), static_cast<const T*>(a.gain),
        static_cast<const T*>(a.residual), a.partials, a.counters, a.m, a.k, a.out_cols, a.second, a.options,
        a.residual_scale, a.rms_eps, cluster);
}

template <typename T, int EPI> int launch(const Args& a, const Shape& shape, cudaStream_t stream) {
    switch (row_tiles(a.m)) {
        case 1: return launch_tiles<T, 1, EPI>(a, shape, stream);
        case 2: return launch_tiles<T, 2, EPI>(a, shape, stream);
        case 3: return launch_tiles<T, 3, EPI>(a, shape, stream);
        default: return launch_tiles<T, 4, EPI>(a, shape, stream);
    }
}

bool valid_shape(int64_t m, int64_t n, int64_t k, int epilogue) {
    if (m < 1 || m > kMaxRows || k < kChunk || k % kChunk != 0 || n < 1 || n > (1 << 24) || k > (1 << 24)) return false;
    if (epilogue < 0 || epilogue > (kSwiGLU | kRowRms | kResidual | kBias)) return false;
    if ((epilogue & kSwiGLU) && (epilogue & kResidual)) return false;
    if ((epilogue & kBias) && !(epilogue & kResidual)) return false;
    if ((epilogue & kRowRms) && k > kMaxNormK) return false;
    return n % 32 == 0;
}

}  // namespace
}  // namespace voxcpm

extern "C" size_t voxcpm_skinny_gemm_workspace_bytes(int64_t m, int64_t n, int64_t k, int epilogue) {
    using namespace voxcpm;
    if (!valid_shape(m, n, k, epilogue)) return 0;
    const Shape shape = plan(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), epilogue & kSwiGLU);
    if (shape.splits <= 1) return 0;
    return static_cast<size_t>(shape.pairs) * shape.splits * shape.values * sizeof(float);
}

extern "C" int64_t voxcpm_skinny_gemm_counters(int64_t n) { return n / 32; }

extern "C" int voxcpm_skinny_gemm(const void* x, const void* weight, void* out, const void* norm_weight,
                                  float rms_eps, const void* residual, float residual_scale, void* workspace,
                                  size_t workspace_bytes, int* counters, int64_t m, int64_t n, int64_t k,
                                  int epilogue, int dtype, void* stream) {
    using namespace voxcpm;
    if (!valid_shape(m, n, k, epilogue) || x == nullptr || weight == nullptr || out == nullptr ||
        !aligned16(x) || !aligned16(weight) || ((epilogue & kResidual) && residual == nullptr) ||
        ((epilogue & kRowRms) && (norm_weight == nullptr || !aligned16(norm_weight) || !(rms_eps >= 0.f))))
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    int major = 0;
    if (current_device_attribute(cudaDevAttrComputeCapabilityMajor, &major) != cudaSuccess || major < 8)
        return VOXCPM_ERROR_INVALID_ARGUMENT;  // mma.sync on bf16/fp16 needs sm_80 or newer
    const int swiglu = epilogue & kSwiGLU;
    const Shape shape = plan(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), swiglu);
    const size_t needed = shape.splits > 1 ? static_cast<size_t>(shape.pairs) * shape.splits * shape.values * sizeof(float) : 0;
    if (workspace_bytes < needed || (needed > 0 && (workspace == nullptr || counters == nullptr)))
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    // SwiGLU reads n = 2 * inter weight rows and writes inter columns.
    const int out_cols = static_cast<int>(swiglu ? n / 2 : n);
    const Args args{x, weight, out, norm_weight, residual, static_cast<float*>(workspace), counters, static_cast<int>(m),
                    static_cast<int>(k), out_cols, swiglu ? out_cols : 16, epilogue & ~kSwiGLU, residual_scale,
                    rms_eps};
    auto s = static_cast<cudaStream_t>(stream);
    switch (dtype) {
        case VOXCPM_BFLOAT16:
            return swiglu ? launch<__nv_bfloat16, kSwiGLU>(args, shape, s) : launch<__nv_bfloat16, kPlain>(args, shape, s);
        case VOXCPM_FLOAT16:
            return swiglu ? launch<__half, kSwiGLU>(args, shape, s) : launch<__half, kPlain>(args, shape, s);
        default:
            return VOXCPM_ERROR_INVALID_ARGUMENT;
    }
}
