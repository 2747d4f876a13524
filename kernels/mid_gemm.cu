// GEMM for 33-64 activation rows against a large weight: out = x @ w^T with x [32 < m <= 64, k].
//
// At 33-64 streams the two LMs' decode GEMMs have one row per stream. skinny_gemm stops at 32 rows:
// its blocks own 32 weight rows each and read the activations themselves, so at 64 rows every
// block would pull twice its weight bytes of activations through L2. cuBLAS serves these shapes at
// 1.3-3.3 TB/s on the H200 (perf/RESULTS.md run 63: 6.5 us for the LM's 10 MB qkv weight), outside
// the chain of programmatic dependent launches, with the norms, the residual adds and SwiGLU left
// to separate kernels. This kernel is skinny_gemm's design rearranged for more rows:
//  - a block owns 128 weight rows (SwiGLU: 64 gate and the matching 64 up rows), one 16-row tile
//    per warp, over a contiguous slice of k (the split);
//  - the block copies the activations into a ring of shared-memory stages of 128 k (cp.async, three
//    stages ahead; [row][32 k] per chunk, so a quarter warp's fragment loads are 128 contiguous
//    bytes), and all 8 warps read them there: L2 carries half the weight's bytes in activations
//    instead of twice;
//  - the weight is the mma's A operand loaded straight from global memory into a ring of registers
//    four 32-k chunks deep per warp, each chunk's slot refilled as soon as it is used (~32 KB a
//    block in flight), with skinny_gemm's k permutation (8 consecutive k per thread, the activation
//    words permuted alike); the first four chunks load before the programmatic wait;
//  - ROW_RMS multiplies the activations by the norm's gain once a stage has landed (each thread
//    the words it copied) and sums their squares there (each row's k passes through one quad of
//    threads); the splits (a power of two) of a block column are one thread block cluster, and
//    each block sums a slice of the partial products over them through distributed shared memory,
//    in split order (deterministic), reading every peer's 16-byte words before adding any: summed
//    one float at a time, that reduction cost ~11 us a call (perf/RESULTS.md run 83);
//  - RESIDUAL, BIAS and SwiGLU are skinny_gemm's epilogues, rounded as there.
// Hopper only (thread block clusters); the host refuses older devices.
#include <cooperative_groups.h>

#include <type_traits>

#include "common.cuh"
#include "mma.cuh"

namespace voxcpm {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kChunk = 32;        // k per pair of m16n8k16 mmas: 4 threads x 8 elements
constexpr int kStageChunks = 4;   // chunks per shared-memory stage
constexpr int kStageK = kStageChunks * kChunk;
constexpr int kRing = 4;          // shared-memory stages, kRing - 1 of them in flight
constexpr int kRows = 64;         // activation rows, padded: 8 n-tiles of 8
constexpr int kTiles = kRows / 8;
constexpr int kBlockRows = kWarps * 16;  // weight rows per block
constexpr int kMaxSplits = 8;     // the portable cluster size
constexpr int kMaxNormK = 8192;
constexpr int kValues = kWarps * kTiles * 4 * 32;  // a block's fp32 partial products

constexpr int kEpiSwiGLU = VOXCPM_SKINNY_SWIGLU;
constexpr int kRowRms = VOXCPM_SKINNY_ROW_RMS;
constexpr int kResidual = VOXCPM_SKINNY_RESIDUAL;
constexpr int kBias = VOXCPM_SKINNY_BIAS;

// Dynamic shared memory: the activation ring (the partial products reuse it after the main loop),
// the row sums of squares and scales, then the norm's gain (ROW_RMS only).
constexpr size_t kStageBytes = kStageChunks * kRows * kChunk * 2;
constexpr size_t kActBytes = kRing * kStageBytes;
static_assert(kActBytes >= kValues * sizeof(float), "the partial products live in the activation ring");
constexpr size_t kSquaresOffset = kActBytes;
constexpr size_t kScaleOffset = kSquaresOffset + kRows * sizeof(float);
constexpr size_t kGainOffset = kScaleOffset + kRows * sizeof(float);
static_assert(kGainOffset % 16 == 0, "the staged gain is read as 16-byte words");

// Device code exists for sm_90 alone (the kernel body below is empty elsewhere).
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
// Weight chunks in flight per warp, a multiple of kStageChunks (8 was slower: run 83, call 2).
constexpr int kDepth = 4;
static_assert(kDepth % kStageChunks == 0, "whole stages of weight chunks");

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

template <typename T> struct Packed;
template <> struct Packed<__nv_bfloat16> { using type = __nv_bfloat162; };
template <> struct Packed<__half> { using type = __half2; };

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
    const T* e = reinterpret_cast<const T*>(&v);
    float sum = 0.f;
#pragma unroll
    for (int i = 0; i < 8; i += 2) {
        const float a = to_float<T>(e[i]);
        const float b = to_float<T>(e[i + 1]);
        sum = fmaf(a, a, fmaf(b, b, sum));
    }
    return sum;
}

// 16 bytes global -> shared through L2 only; zeros when !live (src-size 0 reads nothing).
__device__ __forceinline__ void copy_async(void* dst, const void* src, bool live) {
    const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" : : "r"(addr), "l"(src), "r"(live ? 16 : 0) : "memory");
}
__device__ __forceinline__ void copy_commit() { asm volatile("cp.async.commit_group;\n" : : : "memory"); }
template <int kPending> __device__ __forceinline__ void copy_wait() {
    asm volatile("cp.async.wait_group %0;\n" : : "n"(kPending) : "memory");
}

__device__ __forceinline__ uint4 load_stream(const void* p) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

#endif

// grid (n / 128, splits) in clusters of (1, splits). Block column c owns weight rows
// [128 c, 128 c + 128), or for SwiGLU gate rows [64 c, 64 c + 64) (warps 0-3) and up rows
// [inter + 64 c, ...) (warps 4-7); split s owns k stages [s * stages / splits, (s + 1) * ...).
template <typename T, int EPI>
__global__ void __launch_bounds__(kThreads, 2) mid_gemm_kernel(
    const T* __restrict__ x, const T* __restrict__ w, T* out, const T* __restrict__ gain, const T* residual,
    int m, int k, int out_cols, int inter, int options, float residual_scale, float rms_eps) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    extern __shared__ __align__(16) unsigned char shared[];
    T* act = reinterpret_cast<T*>(shared);
    float* partial = reinterpret_cast<float*>(shared);  // after the main loop
    float* row_squares = reinterpret_cast<float*>(shared + kSquaresOffset);
    float* row_scale = reinterpret_cast<float*>(shared + kScaleOffset);
    uint4* staged_gain = reinterpret_cast<uint4*>(shared + kGainOffset);

    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int g = lane >> 2;
    const int t = lane & 3;
    const int splits = gridDim.y;
    const int split = blockIdx.y;
    const bool row_rms = options & kRowRms;

    const int tile_row = EPI == kEpiSwiGLU ? (warp < 4 ? 0 : inter) + blockIdx.x * 64 + (warp & 3) * 16
                                           : blockIdx.x * kBlockRows + warp * 16;
    const T* w_lo = w + static_cast<size_t>(tile_row + g) * k + t * 8;
    const T* w_hi = w + static_cast<size_t>(tile_row + g + 8) * k + t * 8;
    const int all_stages = k / kStageK;
    const int first_stage = split * all_stages / splits;
    const int stages = (split + 1) * all_stages / splits - first_stage;
    const int first_chunk = first_stage * kStageChunks;
    const int chunks = stages * kStageChunks;

    // The copying thread's activation row and 8-element piece of each chunk of a stage.
    const int stage_row = threadIdx.x >> 2;
    const int piece = threadIdx.x & 3;
    const bool row_live = stage_row < m;
    const T* x_row = x + static_cast<size_t>(row_live ? stage_row : 0) * k + piece * 8;

    // Weight ring: chunk c of the split in slot c % kDepth; chunks past the end reload the split's
    // first chunk (valid memory), never used.
    uint4 weights[kDepth][2];
    auto load_chunk = [&](uint4 (&dst)[2], int c) {
        const size_t offset = static_cast<size_t>(first_chunk + (c < chunks ? c : 0)) * kChunk;
        dst[0] = load_stream(w_lo + offset);
        dst[1] = load_stream(w_hi + offset);
    };
    pdl_launch_dependents();
#pragma unroll
    for (int c = 0; c < kDepth; ++c) load_chunk(weights[c], c);
    if (row_rms) {
        for (int i = threadIdx.x; i < k / 8; i += kThreads) staged_gain[i] = __ldg(reinterpret_cast<const uint4*>(gain) + i);
        __syncthreads();
    }
    pdl_wait();

    auto slot_of = [&](int stage) { return act + static_cast<size_t>(stage % kRing) * (kStageBytes / sizeof(T)); };
    // Issues stage i's copies (one group; an empty group past the end keeps the count uniform).
    auto issue = [&](int i) {
        if (i < stages) {
            T* slot = slot_of(i);
#pragma unroll
            for (int c = 0; c < kStageChunks; ++c)
                copy_async(slot + (c * kRows + stage_row) * kChunk + piece * 8,
                           x_row + static_cast<size_t>(first_stage + i) * kStageK + c * kChunk, row_live);
        }
        copy_commit();
    };
    float squares = 0.f;
    // ROW_RMS: the words this thread copied, times the gain, their squares summed first.
    auto transform = [&](int i) {
        T* slot = slot_of(i);
#pragma unroll
        for (int c = 0; c < kStageChunks; ++c) {
            uint4* at = reinterpret_cast<uint4*>(slot + (c * kRows + stage_row) * kChunk + piece * 8);
            const uint4 v = *at;
            squares += sum_squares<T>(v);
            *at = times<T>(v, staged_gain[((first_stage + i) * kStageK + c * kChunk + piece * 8) / 8]);
        }
    };

    float acc[kTiles][4];
#pragma unroll
    for (int nt = 0; nt < kTiles; ++nt)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[nt][r] = 0.f;

#pragma unroll
    for (int i = 0; i < kRing - 1; ++i) issue(i);
    // kDepth / kStageChunks stages per iteration, so that every weight slot index is static.
    for (int i0 = 0; i0 < stages; i0 += kDepth / kStageChunks) {
#pragma unroll
        for (int di = 0; di < kDepth / kStageChunks; ++di) {
            const int i = i0 + di;
            if (i >= stages) break;
            copy_wait<kRing - 2>();  // this thread's copies of stage i have landed
            if (row_rms) transform(i);
            __syncthreads();  // everyone's have, and stage i - 1's slot is free
            issue(i + kRing - 1);
            const T* stage_rows = slot_of(i) + g * kChunk + t * 8;
#pragma unroll
            for (int c = 0; c < kStageChunks; ++c) {
                uint4 (&wcur)[2] = weights[di * kStageChunks + c];
                const T* tile = stage_rows + c * kRows * kChunk;
#pragma unroll
                for (int nt = 0; nt < kTiles; ++nt) {
                    const uint4 b = *reinterpret_cast<const uint4*>(tile + nt * 8 * kChunk);
                    // Logical k {2t, 2t+1 | 2t+8, 2t+9} of mma j are physical 8t + 4j + {0, 1 | 2, 3}.
#pragma unroll
                    for (int j = 0; j < 2; ++j) {
                        const uint32_t frag[4] = {word(wcur[0], 2 * j), word(wcur[1], 2 * j),
                                                  word(wcur[0], 2 * j + 1), word(wcur[1], 2 * j + 1)};
                        Mma<T>::run(acc[nt], frag, word(b, 2 * j), word(b, 2 * j + 1));
                    }
                }
                const int next = i * kStageChunks + c + kDepth;
                if (next < chunks) load_chunk(wcur, next);
            }
        }
    }
    copy_wait<0>();
    __syncthreads();  // the ring is free for the partial products

#pragma unroll
    for (int nt = 0; nt < kTiles; ++nt)
#pragma unroll
        for (int r = 0; r < 4; ++r) partial[((warp * kTiles + nt) * 4 + r) * 32 + lane] = acc[nt][r];
    if (row_rms) {
        // A row's four pieces are the four lanes of a quad; rows past m sum to zero.
        float sum = squares + __shfl_xor_sync(0xffffffffu, squares, 1);
        sum += __shfl_xor_sync(0xffffffffu, sum, 2);
        if (piece == 0) row_squares[stage_row] = sum;
    }

    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    const bool in_cluster = splits > 1;
    if (in_cluster) cluster.sync(); else __syncthreads();
    auto peer = [&](float* local, int s) { return in_cluster ? cluster.map_shared_rank(local, s) : local; };
    if (row_rms && threadIdx.x < kRows) {
        float squares_of[kMaxSplits];
#pragma unroll
        for (int s = 0; s < kMaxSplits; ++s) squares_of[s] = s < splits ? peer(row_squares, s)[threadIdx.x] : 0.f;
        float total = 0.f;
#pragma unroll
        for (int s = 0; s < kMaxSplits; ++s) total += squares_of[s];  // split order; absent splits add 0
        // As rms_norm computes it: the mean of the squares in fp32, then rsqrt.
        row_scale[threadIdx.x] = rsqrtf(total / k + rms_eps);
    }

    // Block `split` sums a 1/splits slice of the partial products (SwiGLU: of the gate half, with
    // the matching up values kValues / 2 further on) over the splits, as 16-byte words, every peer's
    // words loaded before any is added: one remote round trip. The split count is a compile-time S
    // here (a power of two <= 8) so that every register array index is static.
    constexpr int kSummed = EPI == kEpiSwiGLU ? kValues / 2 : kValues;
    const int first_column = blockIdx.x * (EPI == kEpiSwiGLU ? kBlockRows / 2 : kBlockRows);
    auto finish = [&](auto split_count) {
        constexpr int S = decltype(split_count)::value;
        constexpr int kSlice = kSummed / 4 / S;  // 16-byte words of the slice
        constexpr int kPerThread = (kSlice + kThreads - 1) / kThreads;
        const int first_word = split * kSlice;
        float4 loaded[S][kPerThread], loaded_up[S][kPerThread];
#pragma unroll
        for (int p = 0; p < S; ++p) {
            const float4* from = reinterpret_cast<const float4*>(peer(partial, p));
#pragma unroll
            for (int u = 0; u < kPerThread; ++u) {
                const int local = u * kThreads + threadIdx.x;
                const bool live = local < kSlice;
                loaded[p][u] = live ? from[first_word + local] : make_float4(0.f, 0.f, 0.f, 0.f);
                if (EPI == kEpiSwiGLU)
                    loaded_up[p][u] = live ? from[first_word + local + kValues / 8] : make_float4(0.f, 0.f, 0.f, 0.f);
            }
        }
        if (in_cluster) cluster.sync(); else __syncthreads();  // peers are done with this block's memory
#pragma unroll
        for (int u = 0; u < kPerThread; ++u) {
            const int local = u * kThreads + threadIdx.x;
            if (local >= kSlice) break;
            float4 sum = loaded[0][u], up = loaded_up[0][u];
#pragma unroll
            for (int p = 1; p < S; ++p) {  // split order
                const float4 a = loaded[p][u];
                sum.x += a.x; sum.y += a.y; sum.z += a.z; sum.w += a.w;
                if (EPI == kEpiSwiGLU) {
                    const float4 b = loaded_up[p][u];
                    up.x += b.x; up.y += b.y; up.z += b.z; up.w += b.w;
                }
            }
            // Value v = 4 * word + e is lane 4 * (lane >> 2) + e of one (warp, n-tile, register):
            // one weight row, tokens 8 * n-tile + 2 * e + (register & 1).
            const int v = 4 * (first_word + local);
            const int reg = (v >> 5) & 3;
            const int tile = (v >> 7) & (kTiles - 1);
            const int column = first_column + 16 * (v >> 10) + ((v & 31) >> 2) + 8 * (reg >> 1);
            const float sums[4] = {sum.x, sum.y, sum.z, sum.w};
            const float up_sums[4] = {up.x, up.y, up.z, up.w};
            float resid[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) {  // all residual loads in flight before any store
                const int token = tile * 8 + 2 * e + (reg & 1);
                resid[e] = EPI != kEpiSwiGLU && (options & kResidual) && token < m
                               ? to_float<T>(residual[(options & kBias) ? static_cast<size_t>(column)
                                                                         : static_cast<size_t>(token) * out_cols + column])
                               : 0.f;
            }
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int token = tile * 8 + 2 * e + (reg & 1);
                if (token >= m) continue;
                const float scale = row_rms ? row_scale[token] : 1.f;
                const size_t at = static_cast<size_t>(token) * out_cols + column;
                if (EPI == kEpiSwiGLU) {
                    const float gate_value = round_to<T>(sums[e] * scale);
                    const float up_value = round_to<T>(up_sums[e] * scale);
                    out[at] = from_float<T>(round_to<T>(silu(gate_value)) * up_value);
                } else {
                    float value = sums[e] * scale;
                    if (options & kResidual) value = fmaf(residual_scale, value, resid[e]);
                    out[at] = from_float<T>(value);
                }
            }
        }
    };
    switch (splits) {
        case 1: finish(std::integral_constant<int, 1>{}); break;
        case 2: finish(std::integral_constant<int, 2>{}); break;
        case 4: finish(std::integral_constant<int, 4>{}); break;
        default: finish(std::integral_constant<int, 8>{}); break;
    }
#endif
}

struct Plan {
    int columns;  // block columns: n / 128
    int splits;
};

Plan plan(int n, int k) {
    const int columns = n / kBlockRows;
    // Two blocks fit a multiprocessor (registers and shared memory); fill them once.
    const int slots = 2 * multiprocessors();
    const int most = std::max(1, std::min({slots / std::max(columns, 1), k / kStageK, kMaxSplits}));
    int splits = 1;  // a power of two: the reduction's slices are whole 16-byte words of whole warps
    while (splits * 2 <= most) splits *= 2;
    return {columns, splits};
}

bool valid_shape(int64_t m, int64_t n, int64_t k, int epilogue) {
    if (m <= 32 || m > kRows || k < kStageK || k % kStageK != 0 || n < kBlockRows || n % kBlockRows != 0 ||
        n > (1 << 24) || k > (1 << 24))
        return false;
    if (epilogue < 0 || epilogue > (kEpiSwiGLU | kRowRms | kResidual | kBias)) return false;
    if ((epilogue & kEpiSwiGLU) && (epilogue & kResidual)) return false;
    if ((epilogue & kBias) && !(epilogue & kResidual)) return false;
    return !((epilogue & kRowRms) && k > kMaxNormK);
}

template <typename T, int EPI>
int launch(const void* x, const void* w, void* out, const void* gain, const void* residual, int m, int n, int k,
           int options, float residual_scale, float rms_eps, cudaStream_t stream) {
    auto kernel = mid_gemm_kernel<T, EPI>;
    // More than the 48 KB a launch gets without opting in; the opt-in is per function and device.
    constexpr int kDevices = 64;
    static std::atomic<bool> opted_in[kDevices];
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kDevices) return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (!opted_in[device].load(std::memory_order_relaxed)) {
        const cudaError_t error = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(kGainOffset + kMaxNormK * sizeof(T)));
        if (error != cudaSuccess) return static_cast<int>(error);
        opted_in[device].store(true, std::memory_order_relaxed);
    }
    const Plan p = plan(n, k);
    const size_t shared_bytes = kGainOffset + ((options & kRowRms) ? static_cast<size_t>(k) * sizeof(T) : 0);
    const int out_cols = EPI == kEpiSwiGLU ? n / 2 : n;
    return launch_kernel_in_clusters(kernel, dim3(p.columns, p.splits), dim3(kThreads), shared_bytes,
                                     dim3(1, p.splits), stream, static_cast<const T*>(x), static_cast<const T*>(w),
                                     static_cast<T*>(out), static_cast<const T*>(gain),
                                     static_cast<const T*>(residual), m, k, out_cols, n / 2, options, residual_scale,
                                     rms_eps);
}

}  // namespace
}  // namespace voxcpm

extern "C" int voxcpm_mid_gemm(const void* x, const void* weight, void* out, const void* norm_weight, float rms_eps,
                               const void* residual, float residual_scale, int64_t m, int64_t n, int64_t k,
                               int epilogue, int dtype, void* stream) {
    using namespace voxcpm;
    if (!valid_shape(m, n, k, epilogue) || x == nullptr || weight == nullptr || out == nullptr || !aligned16(x) ||
        !aligned16(weight) || ((epilogue & kResidual) && residual == nullptr) ||
        ((epilogue & kRowRms) && (norm_weight == nullptr || !aligned16(norm_weight) || !(rms_eps >= 0.f))))
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    int major = 0;
    if (current_device_attribute(cudaDevAttrComputeCapabilityMajor, &major) != cudaSuccess || major < 9)
        return VOXCPM_ERROR_INVALID_ARGUMENT;  // thread block clusters need compute capability 9
    const int options = epilogue & ~kEpiSwiGLU;
    const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
    auto s = static_cast<cudaStream_t>(stream);
    const bool swiglu = epilogue & kEpiSwiGLU;
    switch (dtype) {
        case VOXCPM_BFLOAT16:
            return swiglu ? launch<__nv_bfloat16, kEpiSwiGLU>(x, weight, out, norm_weight, residual, mi, ni, ki, options,
                                                              residual_scale, rms_eps, s)
                          : launch<__nv_bfloat16, 0>(x, weight, out, norm_weight, residual, mi, ni, ki, options,
                                                     residual_scale, rms_eps, s);
        case VOXCPM_FLOAT16:
            return swiglu ? launch<__half, kEpiSwiGLU>(x, weight, out, norm_weight, residual, mi, ni, ki, options,
                                                       residual_scale, rms_eps, s)
                          : launch<__half, 0>(x, weight, out, norm_weight, residual, mi, ni, ki, options,
                                              residual_scale, rms_eps, s);
        default:
            return VOXCPM_ERROR_INVALID_ARGUMENT;
    }
}
