// Snake followed by the depthwise dilated causal conv (kernel 7, left zero padding 6 * dilation) that
// opens each AudioVAE residual unit, as one kernel: x is read once, the activation never goes to
// memory, and only the conv output is written. With out_alpha the residual unit's second Snake runs
// on each conv output too, so the unit's activation between its two Snakes never reaches memory.
#include "snake_math.cuh"

namespace voxcpm {
namespace {

constexpr int kTaps = 7;
constexpr int kOutputsPerThread = 8;

// Elements of T in one 16-byte access.
template <typename T> constexpr int kVec = 16 / static_cast<int>(sizeof(T));

// fp32 activations a block keeps: its outputs, the 6 * dilation before them, and up to two vectors of
// slack for aligning the first load down (rounded to 4 floats so the staged outputs after it start
// 16-byte aligned).
template <typename T> __host__ __device__ constexpr int window_floats(int tile, int halo) {
    return tile + ((halo + 2 * kVec<T> + 3) & ~3);
}

// Index of p in units of T modulo VEC: how far p lies past the previous 16-byte boundary. Rows that
// start anywhere (views offset by a few elements, odd lengths) keep 16-byte accesses by aligning
// the tile to their own phase.
template <typename T> __device__ __forceinline__ int vector_phase(const T* p) {
    return static_cast<int>((reinterpret_cast<uintptr_t>(p) / sizeof(T)) % kVec<T>);
}

// One block computes TILE = 8 * THREADS consecutive outputs of one (batch, channel) row. Tiles start
// where the output row is 16-byte aligned (tile 0 may start up to VEC - 1 before t = 0).
// 1. The activations the tile reads, inputs [t0 - 6 * dilation, t0 + TILE), go through Snake into
//    shared memory in fp32, loaded in 16-byte vectors from a start aligned down to x's phase
//    (element by element where a vector crosses the row's ends; zeros outside the row, which is the
//    conv's zero padding on the left).
// 2. Thread j computes outputs j + m * THREADS (a warp reads consecutive words: no bank conflicts),
//    output t summing bias + weight[k] * window[t + k * dilation] over k in order with fmaf, rounded
//    once to T into a staging area. With OUT_SNAKE, that fp32 sum goes through Snake with
//    out_alpha[c] first: the conv output is not rounded to T before it (one rounding, not two).
// 3. The staged outputs leave in 16-byte stores (element by element at the row's ends).
template <typename T, int THREADS, bool OUT_SNAKE>
__global__ void __launch_bounds__(THREADS)
snake_depthwise_conv_kernel(const T* __restrict__ x, int64_t batch_stride, int64_t channel_stride,
                            const T* __restrict__ alpha, const T* __restrict__ weight,
                            const T* __restrict__ bias, const T* __restrict__ out_alpha,
                            T* __restrict__ out, uint32_t channels,
                            int64_t length, uint32_t tiles_per_row, int dilation) {
    constexpr int VEC = kVec<T>;
    constexpr int TILE = THREADS * kOutputsPerThread;
    extern __shared__ float4 shared[];
    float* window = reinterpret_cast<float*>(shared);
    const int halo = (kTaps - 1) * dilation;
    T* staged = reinterpret_cast<T*>(window + window_floats<T>(TILE, halo));
    pdl_launch_dependents();
    pdl_wait();

    const uint32_t row = blockIdx.x / tiles_per_row;
    const uint32_t tile = blockIdx.x - row * tiles_per_row;
    const uint32_t b = row / channels;
    const uint32_t c = row - b * channels;
    T* out_row = out + static_cast<int64_t>(row) * length;
    const int64_t t0 = static_cast<int64_t>(tile) * TILE - vector_phase(out_row);
    if (t0 >= length) return;  // the last tile of a row whose phase left it empty

    const T* x_row = x + b * batch_stride + c * channel_stride;
    const int64_t first = t0 - halo;
    const int shift = static_cast<int>(((vector_phase(x_row) + first) % VEC + VEC) % VEC);
    const int64_t start = first - shift;  // x_row + start is 16-byte aligned
    const int vectors = (TILE + halo + shift + VEC - 1) / VEC;
    const float a = to_float<T>(alpha[c]);
    const float inv = inverse_alpha(a);
    for (int v = threadIdx.x; v < vectors; v += THREADS) {
        const int64_t t = start + static_cast<int64_t>(v) * VEC;
        float act[VEC];
        if (t >= 0 && t + VEC <= length) {
            load_vec<T, VEC>(x_row + t, act);
#pragma unroll
            for (int e = 0; e < VEC; ++e) act[e] = snake<T>(act[e], a, inv);
        } else {
#pragma unroll
            for (int e = 0; e < VEC; ++e)
                act[e] = t + e >= 0 && t + e < length ? snake<T>(to_float<T>(x_row[t + e]), a, inv) : 0.f;
        }
#pragma unroll
        for (int q = 0; q < VEC; q += 4)
            *reinterpret_cast<float4*>(window + v * VEC + q) = make_float4(act[q], act[q + 1], act[q + 2], act[q + 3]);
    }
    __syncthreads();

    float w[kTaps];
#pragma unroll
    for (int k = 0; k < kTaps; ++k) w[k] = to_float<T>(weight[c * kTaps + k]);
    const float b0 = bias != nullptr ? to_float<T>(bias[c]) : 0.f;
    // Alpha 0 gives inverse_alpha 1e9 and sin^2(0) = 0: the second Snake then returns its input's
    // value exactly (a -0 becomes +0), which the residual unit's bias channel relies on.
    const float out_a = OUT_SNAKE ? to_float<T>(out_alpha[c]) : 0.f;
    const float out_inv = OUT_SNAKE ? inverse_alpha(out_a) : 0.f;
    const float* taps = window + shift + threadIdx.x;  // output o, tap k: taps[o - threadIdx.x + k * dilation]
#pragma unroll
    for (int m = 0; m < kOutputsPerThread; ++m) {
        float acc = b0;
#pragma unroll
        for (int k = 0; k < kTaps; ++k) acc = fmaf(w[k], taps[m * THREADS + k * dilation], acc);
        if (OUT_SNAKE) acc = snake<T>(acc, out_a, out_inv);
        staged[threadIdx.x + m * THREADS] = from_float<T>(acc);
    }
    __syncthreads();

    for (int v = threadIdx.x; v < TILE / VEC; v += THREADS) {
        const int64_t t = t0 + static_cast<int64_t>(v) * VEC;
        if (t >= 0 && t + VEC <= length) {
            *reinterpret_cast<Vec<T, VEC>*>(out_row + t) = *reinterpret_cast<const Vec<T, VEC>*>(staged + v * VEC);
        } else {
#pragma unroll
            for (int e = 0; e < VEC; ++e)
                if (t + e >= 0 && t + e < length) out_row[t + e] = staged[v * VEC + e];
        }
    }
}

// Tiles per row: enough for the row plus a tile start moved back by up to vec - 1 to its 16-byte phase.
template <int TILE> int64_t tiles_in_row(int64_t length, int vec) { return (length + vec - 1 + TILE - 1) / TILE; }

template <typename T, int THREADS>
int launch(const void* x, int64_t batch_stride, int64_t channel_stride, const void* alpha, const void* weight,
           const void* bias, const void* out_alpha, void* out, int64_t batch, int64_t channels, int64_t length,
           int dilation, cudaStream_t stream) {
    constexpr int TILE = THREADS * kOutputsPerThread;
    const int64_t tiles = tiles_in_row<TILE>(length, kVec<T>);
    const int64_t blocks = batch * channels * tiles;
    if (blocks > 0x7fffffff) return VOXCPM_ERROR_INVALID_ARGUMENT;
    const int halo = (kTaps - 1) * dilation;
    const size_t shared = window_floats<T>(TILE, halo) * sizeof(float) + TILE * sizeof(T);
    const auto kernel = out_alpha != nullptr ? snake_depthwise_conv_kernel<T, THREADS, true>
                                             : snake_depthwise_conv_kernel<T, THREADS, false>;
    return launch_kernel(kernel, dim3(static_cast<unsigned>(blocks)), dim3(THREADS), shared, stream,
                         static_cast<const T*>(x), batch_stride, channel_stride, static_cast<const T*>(alpha),
                         static_cast<const T*>(weight), static_cast<const T*>(bias),
                         static_cast<const T*>(out_alpha), static_cast<T*>(out), static_cast<uint32_t>(channels),
                         length, static_cast<uint32_t>(tiles), dilation);
}

}  // namespace
}  // namespace voxcpm

extern "C" int voxcpm_snake_depthwise_conv(const void* x, int64_t x_batch_stride, int64_t x_channel_stride,
                                           const void* alpha, const void* weight, const void* bias,
                                           const void* out_alpha, void* out, int64_t batch, int64_t channels,
                                           int64_t length, int dilation, int dtype, void* stream) {
    using namespace voxcpm;
    if (batch < 0 || channels <= 0 || length <= 0 || dilation < 1 || dilation > 1024 || x == nullptr ||
        alpha == nullptr || weight == nullptr || out == nullptr)
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (batch == 0) return 0;
    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        // 1024-output tiles unless 512-output ones read fewer activations (halo plus the idle tail of
        // a row's last tile), as on short rows: [*, 256, 1115] takes 3 x 512 rather than 2 x 1024.
        const int64_t halo = (kTaps - 1) * static_cast<int64_t>(dilation);
        const int64_t wide = tiles_in_row<1024>(length, kVec<T>) * (1024 + halo);
        const int64_t narrow = tiles_in_row<512>(length, kVec<T>) * (512 + halo);
        if (wide <= narrow)
            return launch<T, 128>(x, x_batch_stride, x_channel_stride, alpha, weight, bias, out_alpha, out, batch,
                                  channels, length, dilation, s);
        return launch<T, 64>(x, x_batch_stride, x_channel_stride, alpha, weight, bias, out_alpha, out, batch,
                             channels, length, dilation, s);
    });
}
