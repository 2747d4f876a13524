// Snake followed by the depthwise dilated causal conv (kernel 7, left zero padding 6 * dilation) that
// opens each AudioVAE residual unit, as one kernel: x is read once, the activation never goes to
// memory, and only the conv output is written.
#include "snake_math.cuh"

namespace voxcpm {
namespace {

constexpr int kTaps = 7;

// One block computes TILE consecutive outputs of one (batch, channel) row, one per thread. The
// activations it reads, the TILE inputs below the outputs plus 6 * dilation before them, go through
// Snake into shared memory (zeros left of the row start: the conv pads its input with zeros) and
// output t sums weight[k] * window[t + k * dilation].
template <typename T, int TILE>
__global__ void __launch_bounds__(TILE)
snake_depthwise_conv_kernel(const T* __restrict__ x, int64_t batch_stride, int64_t channel_stride,
                            const T* __restrict__ alpha, const T* __restrict__ weight,
                            const T* __restrict__ bias, T* __restrict__ out, int64_t channels,
                            int64_t length, int64_t tiles_per_row, int dilation) {
    extern __shared__ float window[];  // TILE + 6 * dilation activations
    const int64_t row = blockIdx.x / tiles_per_row;
    const int64_t t0 = (blockIdx.x - row * tiles_per_row) * static_cast<int64_t>(TILE);
    const int64_t b = row / channels;
    const int64_t c = row - b * channels;
    const int halo = (kTaps - 1) * dilation;
    const T* x_row = x + b * batch_stride + c * channel_stride;
    const float a = to_float<T>(alpha[c]);
    const float inv = inverse_alpha(a);
    for (int i = threadIdx.x; i < TILE + halo; i += TILE) {
        const int64_t t = t0 - halo + i;
        window[i] = t >= 0 && t < length ? snake<T>(to_float<T>(x_row[t]), a, inv) : 0.f;
    }
    __syncthreads();
    const int64_t t = t0 + threadIdx.x;
    if (t >= length) return;
    float acc = bias != nullptr ? to_float<T>(bias[c]) : 0.f;
#pragma unroll
    for (int k = 0; k < kTaps; ++k)
        acc = fmaf(to_float<T>(weight[c * kTaps + k]), window[threadIdx.x + k * dilation], acc);
    out[row * length + t] = from_float<T>(acc);
}

template <typename T, int TILE>
int launch(const void* x, int64_t batch_stride, int64_t channel_stride, const void* alpha, const void* weight,
           const void* bias, void* out, int64_t batch, int64_t channels, int64_t length, int dilation,
           cudaStream_t stream) {
    const int64_t tiles_per_row = (length + TILE - 1) / TILE;
    const int64_t blocks = batch * channels * tiles_per_row;
    if (blocks > 0x7fffffff) return VOXCPM_ERROR_INVALID_ARGUMENT;
    const size_t shared = (TILE + (kTaps - 1) * static_cast<size_t>(dilation)) * sizeof(float);
    snake_depthwise_conv_kernel<T, TILE><<<static_cast<unsigned>(blocks), TILE, shared, stream>>>(
        static_cast<const T*>(x), batch_stride, channel_stride, static_cast<const T*>(alpha),
        static_cast<const T*>(weight), static_cast<const T*>(bias), static_cast<T*>(out), channels, length,
        tiles_per_row, dilation);
    return launch_status();
}

}  // namespace
}  // namespace voxcpm

extern "C" int voxcpm_snake_depthwise_conv(const void* x, int64_t x_batch_stride, int64_t x_channel_stride,
                                           const void* alpha, const void* weight, const void* bias, void* out,
                                           int64_t batch, int64_t channels, int64_t length, int dilation,
                                           int dtype, void* stream) {
    using namespace voxcpm;
    if (batch < 0 || channels <= 0 || length <= 0 || dilation < 1 || dilation > 1024 || x == nullptr ||
        alpha == nullptr || weight == nullptr || out == nullptr)
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (batch == 0) return 0;
    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        // Long rows take wide tiles (less halo re-read); short ones narrow tiles (fewer idle threads).
        if (length >= 1024)
            return launch<T, 256>(x, x_batch_stride, x_channel_stride, alpha, weight, bias, out, batch, channels,
                                  length, dilation, s);
        return launch<T, 128>(x, x_batch_stride, x_channel_stride, alpha, weight, bias, out, batch, channels,
                              length, dilation, s);
    });
}
