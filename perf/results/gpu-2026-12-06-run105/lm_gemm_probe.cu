// Run 105's probe (not part of the library): the LMs' 64-row GEMMs out[m, n] = x[m, k] w[n, k]^T as
// CUTLASS sm90 GEMMs with the operands swapped, D[n, m] = W X^T. The weight is then the M operand,
// tiled 128 rows a block by TMA with a deep shared-memory pipeline (the question: does that stream a
// cold 8-50 MB weight nearer HBM bandwidth than cuBLAS's nvjet kernels, ~2.3 TB/s on the H200 in
// run 94's profile?), and the 64 tokens are one N tile. 16-20 M tiles cannot fill 132
// multiprocessors, so the stream-K scheduler splits k: its heuristic, data-parallel, split-K with a
// given factor, or stream-K.
//
//   nvcc -O3 -std=c++17 -DNDEBUG --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a \
//        -I <cutlass>/include -Xcompiler -fPIC -shared lm_gemm_probe.cu -o lm_gemm_probe.so
#include <cuda_runtime.h>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/gemm/kernel/tile_scheduler.hpp>

namespace {

using namespace cute;
using Element = cutlass::bfloat16_t;

template <class TileShape>
struct SwappedGemm {
    using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, Shape<_1, _1, _1>,
        cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, cutlass::layout::ColumnMajor, 8,
        Element, cutlass::layout::ColumnMajor, 8, cutlass::epilogue::TmaWarpSpecializedCooperative>::CollectiveOp;
    using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
        cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor, 8, Element,
        cutlass::layout::ColumnMajor, 8, float, TileShape, Shape<_1, _1, _1>,
        cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
        cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
    using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue,
                                                        cutlass::gemm::StreamKScheduler>;
    using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

using Tile64 = SwappedGemm<Shape<_128, _64, _64>>;
using Tile128 = SwappedGemm<Shape<_128, _64, _128>>;

using Decomposition = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamKParams::DecompositionMode;

template <class Config>
typename Config::Gemm::Arguments arguments(const void* x, const void* w, void* out, int m, int n, int k, int mode,
                                           int splits) {
    using Kernel = typename Config::Kernel;
    typename Kernel::StrideA stride_a{};
    typename Kernel::StrideB stride_b{};
    typename Kernel::StrideD stride_d{};
    // A = w [n, k] row-major; B = x [m, k] (k-major); D [n, m] column-major = out [m, n] row-major.
    get<0>(stride_a) = k;
    get<0>(stride_b) = k;
    get<1>(stride_d) = n;
    typename Config::Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {n, m, k, 1},
        {static_cast<const Element*>(w), stride_a, static_cast<const Element*>(x), stride_b},
        {{}, nullptr, stride_d, static_cast<Element*>(out), stride_d},
    };
    args.epilogue.thread.alpha = 1.f;
    args.epilogue.thread.beta = 0.f;
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    args.hw_info.sm_count = sms;
    args.scheduler.splits = mode == 2 ? splits : 1;
    args.scheduler.decomposition_mode = mode == 1   ? Decomposition::DataParallel
                                        : mode == 2 ? Decomposition::SplitK
                                        : mode == 3 ? Decomposition::StreamK
                                                    : Decomposition::Heuristic;
    return args;
}

template <class Config>
int workspace(const void* x, const void* w, void* out, int m, int n, int k, int mode, int splits, size_t* bytes) {
    auto args = arguments<Config>(x, w, out, m, n, k, mode, splits);
    typename Config::Gemm gemm;
    if (gemm.can_implement(args) != cutlass::Status::kSuccess) return -1;
    *bytes = Config::Gemm::get_workspace_size(args);
    return 0;
}

template <class Config>
int run(const void* x, const void* w, void* out, int m, int n, int k, int mode, int splits, void* ws,
        cudaStream_t stream) {
    auto args = arguments<Config>(x, w, out, m, n, k, mode, splits);
    typename Config::Gemm gemm;
    if (gemm.can_implement(args) != cutlass::Status::kSuccess) return -1;
    if (gemm.initialize(args, ws, stream) != cutlass::Status::kSuccess) return -2;
    if (gemm.run(stream) != cutlass::Status::kSuccess) return -3;
    return static_cast<int>(cudaGetLastError());
}

}  // namespace

// config 0: 128 x 64 x 64 tiles, 1: 128 x 64 x 128. mode 0 heuristic, 1 data-parallel, 2 split-K
// (splits), 3 stream-K.
extern "C" int probe_workspace(int config, const void* x, const void* w, void* out, int m, int n, int k, int mode,
                               int splits, size_t* bytes) {
    return config == 0 ? workspace<Tile64>(x, w, out, m, n, k, mode, splits, bytes)
                       : workspace<Tile128>(x, w, out, m, n, k, mode, splits, bytes);
}

extern "C" int probe_gemm(int config, const void* x, const void* w, void* out, int m, int n, int k, int mode,
                          int splits, void* ws, void* stream) {
    auto s = static_cast<cudaStream_t>(stream);
    return config == 0 ? run<Tile64>(x, w, out, m, n, k, mode, splits, ws, s)
                       : run<Tile128>(x, w, out, m, n, k, mode, splits, ws, s);
}
