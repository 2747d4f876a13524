// The row statistic of an RMSNorm folded into the next GEMM's weight: out[r] = 1 / sqrt(mean(x[r]^2)
// + eps). One warp per row reads it once and writes one float; the normed rows add_rmsnorm would
// write (and the GEMM read back) are never formed.
#include "common.cuh"
#include "row_statistic.cuh"

namespace voxcpm {
namespace {

constexpr int kThreads = 256;  // 8 rows per block

template <typename T, int VEC>
__global__ void __launch_bounds__(kThreads) row_scale_kernel(const T* __restrict__ x, float* __restrict__ out,
                                                             int64_t rows, int hidden, float eps) {
    pdl_wait();
    // Only now: the scaled gate_up kernel after this one reads x before it waits for these scales,
    // so it must not start before the kernels that wrote x have ended (this wait).
    pdl_launch_dependents();
    const int64_t row = (static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x) / 32;
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;
    const float sum_sq = row_sum_squares<T, VEC>(x + row * hidden, hidden, lane);
    if (lane == 0) out[row] = rms_scale(sum_sq, hidden, eps);
}

template <typename T, int VEC>
int launch(const void* x, float* out, int64_t rows, int64_t hidden, float eps, cudaStream_t stream) {
    const int64_t blocks = (rows * 32 + kThreads - 1) / kThreads;
    return launch_kernel(row_scale_kernel<T, VEC>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0, stream,
                         static_cast<const T*>(x), out, rows, static_cast<int>(hidden), eps);
}

}  // namespace
}  // namespace voxcpm

extern "C" int voxcpm_row_scale(const void* x, float* out, int64_t rows, int64_t hidden, float eps, int dtype,
                                void* stream) {
    using namespace voxcpm;
    if (rows < 0 || rows > (int64_t{1} << 36) || hidden <= 0 || hidden > 16384 || x == nullptr || out == nullptr)
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (rows == 0) return 0;
    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        constexpr int kVec = 16 / sizeof(T);
        if (row_vectors<T>(x, hidden)) return launch<T, kVec>(x, out, rows, hidden, eps, s);
        return launch<T, 1>(x, out, rows, hidden, eps, s);
    });
}
