// Snake activation of the AudioVAE, x + sin(alpha_c x)^2 / (alpha_c + 1e-9), as one elementwise pass
// (PyTorch runs it as ~6 kernels, each a full read and write of the decoder's largest activations).
#include "snake_math.cuh"

namespace voxcpm {
namespace {

// Snake over x viewed as [batch, channels, length] (last dimension contiguous, batch and channel
// strides in elements), writing out contiguous. Each thread walks its vectors with a grid stride and
// advances its (batch, channel, column) position by the stride's fixed offset, so no division by
// length or channels happens in the loop. A vector may cross from one channel's row into the next
// only when x is dense (rows adjacent in memory); the launcher picks VEC > 1 for strided x only when
// rows hold whole vectors.
template <typename T, int VEC>
__global__ void snake_kernel(const T* __restrict__ x, int64_t batch_stride, int64_t channel_stride,
                             const T* __restrict__ alpha, T* __restrict__ out, int64_t channels,
                             int64_t length, int64_t vectors) {
    pdl_launch_dependents();
    pdl_wait();
    const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    if (first >= vectors) return;
    const int64_t step_elems = step * VEC;
    const int64_t step_rows = step_elems / length;
    const int64_t step_col = step_elems - step_rows * length;
    const int64_t step_b = step_rows / channels;
    const int64_t step_ch = step_rows - step_b * channels;
    // Position of the thread's current vector: column `col` of channel `ch` of batch entry `b`.
    const int64_t start_row = first * VEC / length;
    int64_t b = start_row / channels, ch = start_row % channels, col = first * VEC - start_row * length;

    for (int64_t idx = first; idx < vectors; idx += step) {
        float v[VEC];
        load_vec<T, VEC>(x + b * batch_stride + ch * channel_stride + col, v);
        int64_t e_ch = ch, e_col = col;
        float a = to_float<T>(alpha[e_ch]);
        float inv = inverse_alpha(a);
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
            if (e_col == length) {  // the vector runs on into the next row (dense x only)
                e_col = 0;
                e_ch = e_ch + 1 == channels ? 0 : e_ch + 1;
                a = to_float<T>(alpha[e_ch]);
                inv = inverse_alpha(a);
            }
            v[e] = snake<T>(v[e], a, inv);
            ++e_col;
        }
        store_vec<T, VEC>(out + idx * VEC, v);

        col += step_col;
        ch += step_ch;
        b += step_b;
        if (col >= length) {
            col -= length;
            ++ch;
        }
        if (ch >= channels) {
            ch -= channels;
            ++b;
        }
    }
}

// The last n % VEC elements of a dense x, one per thread.
template <typename T>
__global__ void snake_tail_kernel(const T* __restrict__ x, const T* __restrict__ alpha, T* __restrict__ out,
                                  int64_t channels, int64_t length, int64_t begin, int64_t n) {
    pdl_launch_dependents();
    pdl_wait();
    const int64_t i = begin + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    const float a = to_float<T>(alpha[(i / length) % channels]);
    const float v = to_float<T>(x[i]);
    out[i] = from_float<T>(snake<T>(v, a, inverse_alpha(a)));
}

template <typename T, int VEC>
int launch(const void* x, int64_t batch_stride, int64_t channel_stride, const void* alpha, void* out,
           int64_t batch, int64_t channels, int64_t length, cudaStream_t stream) {
    constexpr int kThreads = 256;
    const int64_t n = batch * channels * length;
    const int64_t vectors = n / VEC;
    const T* xt = static_cast<const T*>(x);
    const T* at = static_cast<const T*>(alpha);
    T* ot = static_cast<T*>(out);
    if (vectors > 0) {
        // Enough blocks to fill any current GPU several times over; the grid stride covers the rest.
        const int64_t blocks = std::min<int64_t>((vectors + kThreads - 1) / kThreads, 132 * 16);
        const int error = launch_kernel(snake_kernel<T, VEC>, dim3(static_cast<unsigned>(blocks)), dim3(kThreads), 0,
                                        stream, xt, batch_stride, channel_stride, at, ot, channels, length, vectors);
        if (error != 0) return error;
    }
    // Nonzero only for dense x: the launcher gives strided x VEC > 1 only when VEC divides length.
    const int64_t tail = n - vectors * VEC;
    if (tail > 0) return launch_kernel(snake_tail_kernel<T>, dim3(1), dim3(VEC), 0, stream, xt, at, ot, channels, length,
                                       vectors * VEC, n);
    return 0;
}

}  // namespace
}  // namespace voxcpm

extern "C" int voxcpm_snake(const void* x, int64_t x_batch_stride, int64_t x_channel_stride,
                            const void* alpha, void* out, int64_t batch, int64_t channels,
                            int64_t length, int dtype, void* stream) {
    using namespace voxcpm;
    if (batch < 0 || channels <= 0 || length <= 0 || x == nullptr || alpha == nullptr || out == nullptr)
        return VOXCPM_ERROR_INVALID_ARGUMENT;
    if (batch == 0) return 0;
    // Strides of size-1 dimensions are never used; normalising them lets such views count as dense.
    if (batch == 1) x_batch_stride = channels * length;
    if (channels == 1) x_channel_stride = length;
    if (x_batch_stride < 0 || x_channel_stride < 0) return VOXCPM_ERROR_INVALID_ARGUMENT;
    const bool dense = x_channel_stride == length && x_batch_stride == channels * length;
    auto s = static_cast<cudaStream_t>(stream);
    return dispatch_dtype(dtype, [&](auto tag) {
        using T = decltype(tag);
        constexpr int kVec = 16 / sizeof(T);
        const bool rows_hold_vectors =
            length % kVec == 0 && x_channel_stride % kVec == 0 && x_batch_stride % kVec == 0;
        if (aligned16(x) && aligned16(out) && (dense || rows_hold_vectors))
            return launch<T, kVec>(x, x_batch_stride, x_channel_stride, alpha, out, batch, channels, length, s);
        return launch<T, 1>(x, x_batch_stride, x_channel_stride, alpha, out, batch, channels, length, s);
    });
}
