// The MLP's gate_up projection with its SwiGLU in the epilogue, for many rows on Hopper (sm_90a).
//
// At 64+ streams the LocDiT's gate_up GEMM (1408+ rows) runs near the tensor cores' peak on cuBLAS,
// and the separate swiglu pass after it re-reads the [rows, 2 * inter] product from memory: ~8% of
// the step at 64 streams (perf/RESULTS.md run 29). Here CUTLASS's warp-specialized TMA mainloop
// computes the product and each thread turns its own accumulators into silu(gate) * up before
// anything is stored, so only the [rows, inter] result is written.
//
// That needs each gate column and its up column in the same thread. The weight is therefore
// interleaved by blocks of VOXCPM_GATE_UP_INTERLEAVE rows (gate block j, then up block j), and a
// tile spans whole (gate block, up block) pairs: in Hopper's wgmma accumulator layout a thread
// holding column c of a pair also holds column c + VOXCPM_GATE_UP_INTERLEAVE.
//
// Built only when build_kernels.sh finds CUTLASS's headers and compiles this file for sm_90a
// (VOXCPM_CUTLASS_SM90); otherwise the entry point reports cudaErrorNotSupported and the caller
// keeps cuBLAS + swiglu.
#include "common.cuh"

#if defined(VOXCPM_CUTLASS_SM90)
#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/detail.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/kernel/gemm_universal.hpp>

namespace voxcpm {
namespace {

using Element = cutlass::bfloat16_t;
using RowStride = cute::Stride<int64_t, cute::_1, int64_t>;
constexpr int kPair = 2 * VOXCPM_GATE_UP_INTERLEAVE;  // columns of one (gate block, up block) pair

// silu(gate) * up with the unfused path's roundings: the GEMM's outputs rounded to bf16 first (as
// cuBLAS stores them), silu rounded before the product (as the swiglu op does). The division is the
// approximate one: the IEEE division's slow path is a function call, and any call in the kernel
// makes ptxas serialize every wgmma of the mainloop. Its <= 2 ulp in fp32 vanish in the bf16 rounding
// but for rare ties, below the GEMM's own difference from cuBLAS's summation order.
__device__ __forceinline__ float swiglu_of_accumulators(float gate, float up) {
    const float g = round_to<__nv_bfloat16>(gate);
    return round_to<__nv_bfloat16>(__fdividef(g, 1.f + expf(-g))) * round_to<__nv_bfloat16>(up);
}

// An epilogue in the shape of CUTLASS's DefaultEpilogue (registers straight to global memory, no
// shared-memory staging), run by the warp-specialized kernels through Sm90TmaWarpSpecializedAdapter.
// kScaled: each row's accumulators are multiplied by its row_scale first (a folded RMSNorm). A
// separate instantiation, because a runtime switch in this epilogue slowed the unscaled kernel by
// ~12% on the H200 (perf/RESULTS.md run 62).
template <bool kScaled>
struct SwigluEpilogue {
    using EpilogueSchedule = cutlass::epilogue::NoSmemWarpSpecialized;
    using DispatchPolicy = EpilogueSchedule;
    using ElementAccumulator = float;
    using ElementC = Element;  // no source operand; the kernel only needs the type to exist
    using StrideC = RowStride;
    using ElementD = Element;
    using StrideD = RowStride;
    using GmemTiledCopyC = void;
    using GmemTiledCopyD = void;
    using ThreadEpilogueOp = void;  // named by GemmUniversalAdapter, used by nothing on this path

    struct SharedStorage {};
    using TensorStorage = SharedStorage;

    struct Arguments {
        Element* out = nullptr;  // [rows, inter], row stride out_stride
        int64_t out_stride = 0;
        const float* row_scale = nullptr;  // [rows] when kScaled: multiplies row r's accumulators first
    };
    using Params = Arguments;

    template <class ProblemShape>
    static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
        return args;
    }
    template <class ProblemShape>
    static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
        return 0;
    }
    template <class ProblemShape>
    static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                                cutlass::CudaHostAdapter* = nullptr) {
        return cutlass::Status::kSuccess;
    }
    template <class ProblemShape>
    static bool can_implement(ProblemShape const& problem, Arguments const& args) {
        return args.out != nullptr && cute::get<1>(problem) % kPair == 0;
    }

    CUTLASS_HOST_DEVICE SwigluEpilogue(Params const& params_, SharedStorage const& = SharedStorage())
        : params(params_) {}

    template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
              class TiledMma, class ResidueMNK>
    CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK block_shape,
                                   BlockCoordMNKL block_coord, cute::Tensor<FrgEngine, FrgLayout> const& accumulators,
                                   TiledMma tiled_mma, ResidueMNK, int thread_idx, char*) {
        using namespace cute;
        constexpr int kTileN = size<1>(BlockShapeMNK{});
        static_assert(kTileN % kPair == 0, "the tile must span whole (gate block, up block) pairs");
        // wgmma's accumulator values per thread: (2 adjacent columns, 2 rows 8 apart, N/8 column groups
        // 8 apart), one MMA tile across the block's columns; so in each pair, the up value of gate
        // group g is group g + kPairGroups / 2.
        static_assert(rank<0>(FrgLayout{}) == 3 && size<0, 0>(FrgLayout{}) == 2 && size<0, 1>(FrgLayout{}) == 2,
                      "unexpected wgmma accumulator layout");
        static_assert(size<2>(FrgLayout{}) == 1 && size<0, 2>(FrgLayout{}) * 8 == kTileN,
                      "one MMA tile must cover the block's columns");
        constexpr int kPairGroups = kPair / 8;
        constexpr int kMmaM = size<1>(FrgLayout{});

        const int rows = get<0>(problem_shape_mnkl);
        const int m_block = get<0>(block_coord);
        const int n_block = get<1>(block_coord);
        auto thread_mma = tiled_mma.get_thread_slice(thread_idx);
        Tensor coords = thread_mma.partition_C(make_identity_tensor(take<0, 2>(block_shape)));
        Element* out = params.out + static_cast<int64_t>(n_block) * (kTileN / 2);
        const int row0 = m_block * size<0>(block_shape);

        // The scales come from the kernel launched just before this one, which this kernel overlaps
        // as its programmatic dependent (see run): wait for it here, after the first tile's mainloop.
        if constexpr (kScaled) pdl_wait();
        // A thread's rows' scales, loaded once before any store (through the read-only path: the
        // stores to out cannot force them to be reloaded).
        float factor[kMmaM][2];
        CUTLASS_PRAGMA_UNROLL
        for (int mm = 0; mm < kMmaM; ++mm) {
            CUTLASS_PRAGMA_UNROLL
            for (int half_row = 0; half_row < 2; ++half_row) {
                factor[mm][half_row] = 1.f;
                if constexpr (kScaled) {
                    const int row = row0 + get<0>(coords(make_coord(make_coord(0, half_row, 0), mm, 0)));
                    if (row < rows) factor[mm][half_row] = __ldg(params.row_scale + row);
                }
            }
        }

        CUTLASS_PRAGMA_UNROLL
        for (int mm = 0; mm < kMmaM; ++mm) {
            CUTLASS_PRAGMA_UNROLL
            for (int half_row = 0; half_row < 2; ++half_row) {
                CUTLASS_PRAGMA_UNROLL
                for (int pair = 0; pair < kTileN / kPair; ++pair) {
                    CUTLASS_PRAGMA_UNROLL
                    for (int group = pair * kPairGroups; group < pair * kPairGroups + kPairGroups / 2; ++group) {
                        auto gate_at = make_coord(make_coord(0, half_row, group), mm, 0);
                        auto up_at = make_coord(make_coord(0, half_row, group + kPairGroups / 2), mm, 0);
                        auto next_gate_at = make_coord(make_coord(1, half_row, group), mm, 0);
                        auto next_up_at = make_coord(make_coord(1, half_row, group + kPairGroups / 2), mm, 0);
                        const int row = row0 + get<0>(coords(gate_at));
                        // Column in the tile's output: the pairs before it, then the gate column.
                        const int col = get<1>(coords(gate_at)) - pair * VOXCPM_GATE_UP_INTERLEAVE;
                        if (row >= rows) continue;
                        float gate = accumulators(gate_at), up = accumulators(up_at);
                        float next_gate = accumulators(next_gate_at), next_up = accumulators(next_up_at);
                        if constexpr (kScaled) {
                            const float f = factor[mm][half_row];
                            gate *= f;
                            up *= f;
                            next_gate *= f;
                            next_up *= f;
                        }
                        __nv_bfloat162 value = __floats2bfloat162_rn(swiglu_of_accumulators(gate, up),
                                                                     swiglu_of_accumulators(next_gate, next_up));
                        *reinterpret_cast<__nv_bfloat162*>(out + static_cast<int64_t>(row) * params.out_stride + col) =
                            value;
                    }
                }
            }
        }
    }

    Params params;
};

template <bool kScaled>
using Epilogue = cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<SwigluEpilogue<kScaled>>;

// A kernel for one (tile, cluster, schedule): the mainloop from CUTLASS's builder with as many
// pipeline stages as shared memory holds (the epilogue uses none).
template <class TileShape, class ClusterShape, class Schedule, bool kScaled_>
struct GateUpGemm {
    static constexpr bool kScaled = kScaled_;
    using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor, 8, Element,
        cutlass::layout::ColumnMajor, 8, float, TileShape, ClusterShape,
        cutlass::gemm::collective::StageCountAutoCarveout<0>, Schedule>::CollectiveOp;
    using Kernel =
        cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue<kScaled>>;
    using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

// Schedules the caller chooses between by timing (VOXCPM_GATE_UP_* in the header): tile rows x
// columns and thread block cluster. Both are pingpong kernels: the two consumer warpgroups take
// turns, one's epilogue (this file's global stores) running under the other's mainloop. Cooperative
// tiles (the warpgroups sharing one tile) and 128 x 128 tiles lost on every LocDiT shape (run 34).
template <int M, int N, int ClusterM, bool kScaled>
using Pingpong = GateUpGemm<cute::Shape<cute::Int<M>, cute::Int<N>, cute::_64>,
                            cute::Shape<cute::Int<ClusterM>, cute::_1, cute::_1>,
                            cutlass::gemm::KernelTmaWarpSpecializedPingpong, kScaled>;

template <class Config>
int run(const void* x, const void* weight, const float* row_scale, void* out, int64_t rows, int64_t k, int64_t inter,
        cudaStream_t stream) {
    using Gemm = typename Config::Gemm;
    const int n = static_cast<int>(2 * inter);
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {static_cast<int>(rows), n, static_cast<int>(k), 1},
        {static_cast<const Element*>(x), cute::make_stride(k, cute::_1{}, int64_t(0)),
         static_cast<const Element*>(weight), cute::make_stride(k, cute::_1{}, int64_t(0))},
        {static_cast<Element*>(out), inter, row_scale},
    };
    args.hw_info.sm_count = multiprocessors();
    if (args.hw_info.sm_count == 0) return static_cast<int>(cudaErrorInvalidDevice);
    Gemm gemm;
    if (gemm.can_implement(args) != cutlass::Status::kSuccess) return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (Gemm::get_workspace_size(args) != 0) return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (gemm.initialize(args, nullptr, stream) != cutlass::Status::kSuccess) return launch_status();
    // With a row scale the kernel starts as a programmatic dependent of row_scale, the kernel before
    // it: x is final before row_scale starts, so the mainloop needs nothing from it, and only the
    // epilogue waits (griddepcontrol.wait; CUTLASS's own waits stay compiled out without
    // CUTLASS_ENABLE_GDC_FOR_SM90). The mainloop then starts as row_scale's blocks leave instead of
    // after its whole grid has ended.
    const bool overlap_previous = Config::kScaled && pdl_enabled();
    if (gemm.run(stream, nullptr, overlap_previous) != cutlass::Status::kSuccess) {
        const int error = launch_status();
        return error != 0 ? error : static_cast<int>(cudaErrorLaunchFailure);
    }
    return launch_status();
}

template <int M, int N, int ClusterM>
int run_scaled_or_not(const void* x, const void* weight, const float* row_scale, void* out, int64_t rows, int64_t k,
                      int64_t inter, cudaStream_t stream) {
    if (row_scale != nullptr)
        return run<Pingpong<M, N, ClusterM, true>>(x, weight, row_scale, out, rows, k, inter, stream);
    return run<Pingpong<M, N, ClusterM, false>>(x, weight, row_scale, out, rows, k, inter, stream);
}

bool is_sm90() {
    int major = 0, minor = 0;
    return current_device_attribute(cudaDevAttrComputeCapabilityMajor, &major) == 0 &&
           current_device_attribute(cudaDevAttrComputeCapabilityMinor, &minor) == 0 && major == 9 && minor == 0;
}

}  // namespace
}  // namespace voxcpm
#endif  // VOXCPM_CUTLASS_SM90

extern "C" int voxcpm_gate_up_swiglu_sm90(const void* x, const void* weight, const float* row_scale, void* out,
                                          int64_t rows, int64_t k, int64_t inter, int schedule, int dtype,
                                          void* stream) {
    using namespace voxcpm;
    if (rows < 0 || k <= 0 || inter <= 0 || x == nullptr || weight == nullptr || out == nullptr)
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (dtype != VOXCPM_BFLOAT16 || k % 8 != 0 || inter % (2 * VOXCPM_GATE_UP_INTERLEAVE) != 0 || !aligned16(x) ||
        !aligned16(weight) || !aligned16(out) || rows > INT32_MAX || 2 * inter > INT32_MAX || k > INT32_MAX ||
        schedule < 0 || schedule >= VOXCPM_GATE_UP_SCHEDULES)
        return VOXCPM_ERROR_INVALID_ARGUMENT;
#if defined(VOXCPM_CUTLASS_SM90)
    // Checked before the empty case, so a call with rows == 0 tells the caller whether the op runs here.
    if (!is_sm90()) return static_cast<int>(cudaErrorNotSupported);
    if (rows == 0) return 0;
    auto s = static_cast<cudaStream_t>(stream);
    switch (schedule) {
        case VOXCPM_GATE_UP_PINGPONG_64X256:
            return run_scaled_or_not<64, 256, 2>(x, weight, row_scale, out, rows, k, inter, s);
        case VOXCPM_GATE_UP_PINGPONG_64X256_NO_CLUSTER:
            return run_scaled_or_not<64, 256, 1>(x, weight, row_scale, out, rows, k, inter, s);
        default: return VOXCPM_ERROR_INVALID_ARGUMENT;
    }
#else
    (void)stream;
    return static_cast<int>(cudaErrorNotSupported);
#endif
}
