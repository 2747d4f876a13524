/*
 * C ABI of libvoxcpm_kernels.so: the fused CUDA ops of voxcpm-triton.
 *
 * Plain C so the library is loadable with ctypes (or dlopen) and independent of torch's C++ ABI.
 * Every op takes raw device pointers, sizes, a dtype code and a CUDA stream passed as void*
 * (cudaStream_t; NULL is the legacy default stream) and returns a cudaError_t as int (0 = success).
 * Launches are asynchronous and enqueue only kernels on the given stream: no allocation, no host
 * synchronisation, so every op can be captured into a CUDA graph. The caller makes the tensors'
 * device current. Element tensors (dtype code below) are bf16, fp16 or fp32; accumulation is fp32.
 */
#ifndef VOXCPM_KERNELS_H
#define VOXCPM_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VOXCPM_API __attribute__((visibility("default")))

/* Bumped whenever a signature below changes; the Python loader refuses a mismatched library. */
#define VOXCPM_KERNELS_ABI_VERSION 11

enum voxcpm_dtype { VOXCPM_FLOAT32 = 0, VOXCPM_FLOAT16 = 1, VOXCPM_BFLOAT16 = 2 };

/* Returned (besides cudaError_t values) when arguments are out of range; no kernel was launched. */
#define VOXCPM_ERROR_INVALID_ARGUMENT 1 /* == cudaErrorInvalidValue */

VOXCPM_API int voxcpm_abi_version(void);
VOXCPM_API const char* voxcpm_error_string(int error);

/*
 * Residual add + RMSNorm over rows of `hidden` contiguous elements:
 *   if residual != NULL: x = x + residual * residual_scale   (rounded to dtype, written back to x)
 *   out = (x * rsqrt(mean(x^2) + eps)) rounded to dtype, times weight, rounded to dtype
 * The two roundings reproduce MiniCPM's rms_layernorm in low precision. x, residual, out: [rows,
 * hidden]; weight: [hidden]; all of `dtype`. hidden <= 16384.
 */
VOXCPM_API int voxcpm_add_rmsnorm(void* x, const void* residual, const void* weight, void* out,
                                  int64_t rows, int64_t hidden, float eps, float residual_scale,
                                  int dtype, void* stream);

/*
 * The statistic of an RMSNorm whose weight was folded into the next GEMM's weight:
 *   out[r] = 1 / sqrt(mean(x[r]^2) + eps), fp32, from the rows of x [rows, hidden] (dtype,
 *   contiguous); out: fp32 [rows]. hidden <= 16384.
 * x @ (W diag(w))^T times out[r] per row is rmsnorm(x) * w @ W^T up to roundings, so a layer can
 * skip writing the normed rows: the GEMM reads x itself and its consumer applies the row scale.
 */
VOXCPM_API int voxcpm_row_scale(const void* x, float* out, int64_t rows, int64_t hidden, float eps, int dtype,
                                void* stream);

/*
 * Rotary embedding (rotate-half convention) of q and k, fused with writing k (rotated) and v into a
 * per-slot KV cache.
 *   q: [tokens, q_heads, head_dim], k, v: [tokens, kv_heads, head_dim]; strides in elements, the
 *     last dimension contiguous (views into one fused qkv projection output are fine).
 *   q_out: [tokens, q_heads, head_dim] contiguous, receives rotated q.
 *   cos, sin: fp32 [table_len, head_dim] per-position tables (LongRoPE factors and scaling already
 *     applied), or both NULL for no rotation (residual LM: cache write only, q copied).
 *   positions, slot_ids: int32 [tokens]. A token with slot_id < 0 (batch padding), slot_id >=
 *     num_slots or a position outside [0, max_len) writes nothing to the cache; its q_out is still
 *     written (position clamped into the table).
 *   k_cache, v_cache: [num_slots, kv_heads, max_len, head_dim] with the given strides (elements;
 *     same for both caches), the last dimension contiguous.
 *   norm_input: [tokens, hidden] contiguous, of dtype, or NULL: token i's q, k and v are multiplied
 *     in fp32 by 1 / sqrt(mean(norm_input[i]^2) + eps) before the rotation and the one rounding to
 *     dtype (an RMSNorm whose weight is folded into the qkv weight, the GEMM having read the
 *     un-normed rows). 1 <= hidden <= 16384, eps > 0.
 * head_dim even, <= 256.
 */
VOXCPM_API int voxcpm_rope_kv_write(const void* q, int64_t q_token_stride, int64_t q_head_stride,
                                    const void* k, int64_t k_token_stride, int64_t k_head_stride,
                                    const void* v, int64_t v_token_stride, int64_t v_head_stride,
                                    void* q_out, const float* cos, const float* sin,
                                    int64_t table_len, const int32_t* positions,
                                    const int32_t* slot_ids, void* k_cache, void* v_cache,
                                    int64_t cache_slot_stride, int64_t cache_head_stride,
                                    int64_t cache_pos_stride, int64_t num_slots, int64_t max_len,
                                    int64_t tokens, int q_heads, int kv_heads, int head_dim,
                                    const void* norm_input, int64_t hidden, float eps, int dtype,
                                    void* stream);

/*
 * Decode attention: one query token per stream, grouped-query heads, over the live part of a
 * per-slot KV cache. Stream b attends to positions [0, lengths[b]) of slot slot_ids[b] (lengths
 * include the token just written). Softmax in fp32. Each stream's live range is split evenly over
 * num_splits blocks per KV head (split-K), combined by a second kernel when num_splits > 1.
 *   q: [batch, q_heads, head_dim] contiguous; out: same shape, contiguous.
 *   k_cache, v_cache: as in voxcpm_rope_kv_write.
 *   slot_ids, lengths: int32 [batch]. slot_id < 0 or length <= 0 gives a zero output row; lengths
 *     above max_len are clamped to max_len.
 *   workspace: device memory of voxcpm_decode_attention_workspace_bytes(...) bytes (may be NULL when
 *     that is 0).
 * head_dim in {64, 128}; q_heads a multiple of kv_heads; 1 <= num_splits <= 256.
 */
VOXCPM_API size_t voxcpm_decode_attention_workspace_bytes(int64_t batch, int q_heads, int head_dim,
                                                          int num_splits);
VOXCPM_API int voxcpm_decode_attention(const void* q, const void* k_cache, const void* v_cache,
                                       int64_t cache_slot_stride, int64_t cache_head_stride,
                                       int64_t cache_pos_stride, int64_t num_slots,
                                       int64_t max_len, const int32_t* slot_ids,
                                       const int32_t* lengths, void* out, void* workspace,
                                       size_t workspace_bytes, int64_t batch, int q_heads,
                                       int kv_heads, int head_dim, int num_splits, float scale,
                                       int dtype, void* stream);

/*
 * voxcpm_rope_kv_write followed by voxcpm_decode_attention, in the attention kernel: each block
 * rotates (and with norm_input scales) its query heads as it loads them, and the blocks that read
 * the token's position write its rotated k and its v there first. Same arguments as those two:
 * q [batch] rows of q_row_stride elements holding q_heads x head_dim raw q values (contiguous
 * heads), k_new / v_new [batch] rows of kv_row_stride holding kv_heads x head_dim, positions int32
 * [batch], cos / sin [table_len, head_dim] float32 or NULL, norm_input [batch, hidden] or NULL (eps
 * its RMSNorm epsilon). Tensor-core kernel only: bf16 / fp16, compute capability >= 8, and not
 * under VOXCPM_DECODE_ATTENTION_MMA=0; anything else is an invalid argument. Row strides multiples
 * of 8 elements, every pointer 16-byte aligned.
 */
VOXCPM_API int voxcpm_decode_attention_rope(const void* q, int64_t q_row_stride, const void* k_new,
                                            const void* v_new, int64_t kv_row_stride,
                                            const float* cos, const float* sin, int64_t table_len,
                                            const int32_t* positions, const void* norm_input,
                                            int64_t hidden, float eps, const void* k_cache,
                                            const void* v_cache, int64_t cache_slot_stride,
                                            int64_t cache_head_stride, int64_t cache_pos_stride,
                                            int64_t num_slots, int64_t max_len,
                                            const int32_t* slot_ids, const int32_t* lengths,
                                            void* out, void* workspace, size_t workspace_bytes,
                                            int64_t batch, int q_heads, int kv_heads, int head_dim,
                                            int num_splits, float scale, int dtype, void* stream);

/*
 * Whole-sequence attention over short sequences straight from a fused qkv projection output, with
 * rotary embedding (rotate-half, positions 0..seq_len-1 of every sequence), grouped-query heads (q
 * head h reads kv head h / (q_heads / kv_heads)) and the output in o_proj's layout:
 *   qkv: [sequences * seq_len, (q_heads + 2 * kv_heads) * head_dim] contiguous, q heads first, then
 *     k heads, then v heads (F.linear with the concatenated [q; k; v] weight).
 *   cos, sin: fp32 [table_len, head_dim] contiguous tables, table_len >= seq_len, or both NULL for
 *     no rotation. Rotated q and k are rounded to dtype before the products, as the reference is.
 *   row_scale: fp32 [sequences * seq_len], or NULL: token r's q, k and v rows are multiplied by
 *     row_scale[r] (in fp32, before the rotation) — the RMSNorm statistic of a qkv GEMM that read
 *     un-normed rows (voxcpm_row_scale).
 *   norm_input: [sequences * seq_len, hidden] contiguous, of dtype, or NULL: instead of row_scale
 *     (which must then be NULL), the kernel computes that statistic itself from the rows the qkv
 *     GEMM read, 1 / sqrt(mean(x^2) + eps), bit for bit voxcpm_row_scale's. It reads them before
 *     waiting for the kernel launched just before it (programmatic dependent launch): they may feed
 *     that kernel (the qkv GEMM) but must not come from it. 1 <= hidden <= 16384.
 *   out: [sequences * seq_len, q_heads * head_dim] contiguous:
 *     softmax(q k^T * scale) v over all keys of the sequence (keys <= the query's position when
 *     causal != 0); logits and softmax in fp32. The weighted sum takes the fp32 probabilities
 *     whole (fp32 data, GPUs before compute capability 8) or as two 16-bit parts on the tensor
 *     cores (bf16 / fp16: about 16 of their mantissa bits), accumulating in fp32.
 * 1 <= seq_len <= 32; head_dim in {64, 128}; qkv, out (and cos, sin) 16-byte aligned.
 */
VOXCPM_API int voxcpm_short_attention(const void* qkv, const float* cos, const float* sin,
                                      int64_t table_len, const float* row_scale, const void* norm_input,
                                      int64_t hidden, float eps, void* out, int64_t sequences, int seq_len,
                                      int q_heads, int kv_heads, int head_dim, float scale,
                                      int causal, int dtype, void* stream);

/*
 * SwiGLU on a fused gate_up projection output: out = silu(gate) * up, gate = gate_up[:, :inter],
 * up = gate_up[:, inter:]. silu(gate) is rounded to dtype before the product, as PyTorch does.
 *   gate_up: [rows, 2 * inter] contiguous; out: [rows, inter] contiguous.
 *   norm_input: [rows, hidden] contiguous, of dtype, or NULL: row r's gate and up are first
 *     multiplied in fp32 by 1 / sqrt(mean(norm_input[r]^2) + eps) and rounded to dtype (an RMSNorm
 *     whose weight is folded into the gate_up weight). 1 <= hidden <= 16384, eps > 0, rows <= 65535.
 */
VOXCPM_API int voxcpm_swiglu(const void* gate_up, const void* norm_input, int64_t hidden, float eps, void* out,
                             int64_t rows, int64_t inter, int dtype, void* stream);

/*
 * Classifier-free guidance with CFG-zero-star plus one Euler step of the flow-matching solver, per
 * stream b (all arithmetic in fp32):
 *   st = <v_cond[b], v_uncond[b]> / (|v_uncond[b]|^2 + 1e-8)
 *   v  = v_uncond[b] * st + cfg[b] * (v_cond[b] - v_uncond[b] * st)
 *   x[b] -= dt[b] * v                                  (x updated in place)
 *   x, v_cond, v_uncond: [batch, elems] contiguous of dtype; cfg, dt: fp32 [batch].
 */
VOXCPM_API int voxcpm_cfg_euler(void* x, const void* v_cond, const void* v_uncond, const float* cfg,
                                const float* dt, int64_t batch, int64_t elems, int dtype,
                                void* stream);

/*
 * Finite scalar quantisation between the two FSQ projections:
 *   out = round(tanh(h) * scale) / scale, each intermediate rounded to dtype as PyTorch does;
 *   round is half-to-even. h, out: n contiguous elements (out may equal h).
 */
VOXCPM_API int voxcpm_fsq(const void* h, void* out, int64_t n, float scale, int dtype,
                          void* stream);

/*
 * Snake activation of the AudioVAE: out = x + sin(alpha[c] * x)^2 / (alpha[c] + 1e-9) per channel c,
 * in fp32 with one rounding to dtype at the end (PyTorch's low-precision expression rounds after each
 * of its ~6 ops instead).
 *   x: [batch, channels, length] with the last dimension contiguous and batch / channel strides in
 *     elements (a view trimmed along length is fine); alpha: [channels] contiguous of dtype;
 *   out: [batch, channels, length] contiguous, not overlapping x unless equal to a dense x.
 */
VOXCPM_API int voxcpm_snake(const void* x, int64_t x_batch_stride, int64_t x_channel_stride,
                            const void* alpha, void* out, int64_t batch, int64_t channels,
                            int64_t length, int dtype, void* stream);

/*
 * Linear layer for a few activation rows (tensor cores, split-K with a deterministic reduction: by
 * the block that finishes last, or on compute capability 9+ through distributed shared memory
 * within a thread block cluster of at most 8 splits; VOXCPM_SKINNY_CLUSTER=0 keeps the first).
 * `epilogue` is a sum of these flags:
 *   0: out[m, n] = x[m, k] @ weight[n, k]^T
 *   VOXCPM_SKINNY_SWIGLU: weight is [gate; up] ([n = 2 * inter, k]); out[m, inter] =
 *     silu(gate) * up, with gate and up rounded to dtype first and silu(gate) before the product
 *     (the values swiglu would produce from a materialised gate_up output).
 *   VOXCPM_SKINNY_ROW_RMS: the GEMM of RMSNorm(x) with gain norm_weight [k]: x * norm_weight
 *     (each product rounded to dtype) times weight^T, each row then multiplied by
 *     rsqrt(mean(x_row^2) + rms_eps) in fp32 (gate and up before SwiGLU). norm_weight contiguous,
 *     16-byte aligned, of dtype; k <= 8192.
 *   VOXCPM_SKINNY_RESIDUAL (not with SwiGLU): out = residual + residual_scale * product, rounded
 *     once; residual [m, n] contiguous, and out may be residual itself (updated in place).
 *   VOXCPM_SKINNY_BIAS (only with RESIDUAL): residual is one [n] row added to every row (a
 *     layer's bias, residual_scale 1 for x @ weight^T + bias); out must not overlap it.
 * x, weight contiguous and 16-byte aligned, not overlapping out; out contiguous. Accumulation in fp32.
 * weight and norm_weight are read before the launch waits for the kernel before it on the stream
 * (programmatic dependent launch), so that kernel must not write them.
 * 1 <= m <= 32; k a multiple of 32; n a multiple of 32; dtype bf16 or fp16; compute capability >= 8.
 *   workspace: voxcpm_skinny_gemm_workspace_bytes(m, n, k, epilogue) bytes of device memory (NULL
 *     when that is 0); counters: int32 device memory of voxcpm_skinny_gemm_counters(n) entries, all
 *     zero, which the launch leaves zero again (one buffer serves every launch ordered on a stream;
 *     launches running concurrently on two streams need two buffers).
 */
#define VOXCPM_SKINNY_SWIGLU 1
#define VOXCPM_SKINNY_ROW_RMS 2
#define VOXCPM_SKINNY_RESIDUAL 4
#define VOXCPM_SKINNY_BIAS 8
VOXCPM_API size_t voxcpm_skinny_gemm_workspace_bytes(int64_t m, int64_t n, int64_t k, int epilogue);
VOXCPM_API int64_t voxcpm_skinny_gemm_counters(int64_t n);
VOXCPM_API int voxcpm_skinny_gemm(const void* x, const void* weight, void* out,
                                  const void* norm_weight, float rms_eps, const void* residual,
                                  float residual_scale, void* workspace, size_t workspace_bytes,
                                  int* counters, int64_t m, int64_t n, int64_t k, int epilogue,
                                  int dtype, void* stream);

/*
 * Snake (as voxcpm_snake, kept in fp32) followed by a depthwise dilated causal conv of kernel 7,
 * the opening of each AudioVAE residual unit, and optionally the unit's second Snake, rounded once
 * to dtype:
 *   y[b, c, t] = bias[c] + sum_k weight[c, k] * snake_alpha(x[b, c, t - (6 - k) * dilation]),
 *   with zero for positions before the row start (the conv's left padding of 6 * dilation);
 *   out = y, or snake_out_alpha(y) when out_alpha != NULL (y kept in fp32, not rounded first).
 *   x: as in voxcpm_snake; alpha, bias, out_alpha: [channels] (bias and out_alpha may be NULL;
 *   out_alpha 0 makes its Snake exactly the identity); weight: [channels, 7] contiguous (the conv's
 *   [channels, 1, 7]); out: [batch, channels, length] contiguous, not overlapping x.
 *   1 <= dilation <= 1024.
 */
VOXCPM_API int voxcpm_snake_depthwise_conv(const void* x, int64_t x_batch_stride,
                                           int64_t x_channel_stride, const void* alpha,
                                           const void* weight, const void* bias,
                                           const void* out_alpha, void* out, int64_t batch,
                                           int64_t channels, int64_t length, int dilation,
                                           int dtype, void* stream);

/*
 * Per-row dynamic FP8 quantisation of a GEMM activation (the A operand of an FP8 GEMM with rowwise
 * scales, torch._scaled_mm's scale_a):
 *   activation 0: y = x[r, :]                       x: [rows, k]
 *   activation 1: y = silu(gate) * up (SwiGLU, rounded to dtype as voxcpm_swiglu rounds it) of the
 *                 fused row x[r, :] = [gate (k) | up (k)]    x: [rows, 2 * k]
 *   scale[r] = max|y| / 448 in fp32 (1 when the row is all zeros)
 *   out[r, c] = float8_e4m3fn(y[c] / scale[r]): true division, round to nearest even, saturating
 *     at +-448. Rows holding NaN or inf get unspecified codes.
 * x contiguous of dtype; out: [rows, k] bytes (e4m3fn) contiguous; scale: fp32 [rows]. x and out
 * 16-byte aligned; k a multiple of 16, <= 16384 (<= 8192 for fp32 x).
 */
VOXCPM_API int voxcpm_quantize_fp8(const void* x, void* out, float* scale, int64_t rows, int64_t k,
                                   int activation, int dtype, void* stream);

/*
 * The LocDiT's input sequence for both guidance branches (VoxCPM2's layout):
 *   out[branch, b] = [mu_pair[branch, b] as mu_tokens rows; time; cond[b]; x[b]]
 *   mu_pair: [2, batch, mu_tokens, hidden]; time: [hidden] (one token for every sequence);
 *   cond: [batch, cond_tokens, hidden]; x: [batch, patch, hidden]; all contiguous, of `dtype`;
 *   out: [2, batch, mu_tokens + 1 + cond_tokens + patch, hidden] contiguous.
 * A copy: out is bit for bit the concatenation.
 */
VOXCPM_API int voxcpm_locdit_sequence(const void* mu_pair, const void* time, const void* cond, const void* x,
                                      void* out, int64_t batch, int64_t mu_tokens, int64_t cond_tokens,
                                      int64_t patch, int64_t hidden, int dtype, void* stream);

/*
 * The MLP's gate_up GEMM with SwiGLU in its epilogue, for many rows on compute capability 9.0
 * (CUTLASS, sm_90a): out[r, j] = silu(g) * u with g = x[r] . gate[j], u = x[r] . up[j], each
 * rounded to bf16 as cuBLAS's output would be and silu rounded before the product (as swiglu).
 *   x: [rows, k] bf16 contiguous; out: [rows, inter] bf16 contiguous;
 *   weight: [2 * inter, k] bf16, the fused [gate; up] weight with its rows interleaved by blocks of
 *     VOXCPM_GATE_UP_INTERLEAVE (gate rows 0..B-1, up rows 0..B-1, gate rows B..2B-1, ...).
 *   row_scale: fp32 [rows] or NULL: row r's g and u are x[r] . gate[j] * row_scale[r] (and likewise
 *     u), before their rounding (an RMSNorm folded into the weight, voxcpm_row_scale). With
 *     row_scale the kernel is launched as a programmatic dependent and reads row_scale only after
 *     waiting for the kernel launched just before it, but reads x before that: row_scale may come
 *     from that kernel (voxcpm_row_scale, as in the MLP), x must not.
 * k a multiple of 8, inter a multiple of 2 * VOXCPM_GATE_UP_INTERLEAVE (the widest tile spans two
 * pairs of blocks), pointers 16-byte aligned.
 * schedule: 0 <= schedule < VOXCPM_GATE_UP_SCHEDULES, one of VOXCPM_GATE_UP_* (CUTLASS's pingpong
 * kernel, tile rows x columns, 2 x 1 thread block clusters unless NO_CLUSTER; the ones that won on
 * the H200, perf/RESULTS.md run 34).
 * Returns cudaErrorNotSupported on other GPUs or when the library was built without CUTLASS, also
 * for rows == 0 (a launch-free probe: 0 means the op runs on the current device).
 */
#define VOXCPM_GATE_UP_INTERLEAVE 64
#define VOXCPM_GATE_UP_PINGPONG_64X256 0
#define VOXCPM_GATE_UP_PINGPONG_64X256_NO_CLUSTER 1
#define VOXCPM_GATE_UP_SCHEDULES 2
VOXCPM_API int voxcpm_gate_up_swiglu_sm90(const void* x, const void* weight, const float* row_scale,
                                          void* out, int64_t rows, int64_t k, int64_t inter,
                                          int schedule, int dtype, void* stream);

/*
 * The decode step's per-slot state (the engine's ModelRunner), one launch at each end of a step.
 * The tables hold slots + 1 rows, the last the padding rows' scratch slot; all element tensors are
 * contiguous of dtype. index: int64 [2, batch], each batch row's slot, then its noise-ring row
 * (rows whose slot or ring row is out of range are skipped).
 * voxcpm_step_gather reads, per batch row b of slot s and ring row r:
 *   noise[b] = ring[s, r] transposed ([feat, patch] -> [patch, feat]);
 *   lm_out[b] = lm_hidden[s]; residual_out[b] = residual_hidden[s]; prev_out[b] = prev_patch[s];
 *   cfg_out[b] = cfg_value[s]; kernel_index[:, b] = (s, positions[s], positions[s] + 1) as int32.
 *   ring: [slots + 1, block, feat, patch]; lm_hidden, residual_hidden: [slots + 1, hidden];
 *   prev_patch: [slots + 1, patch, feat]; cfg_value: fp32 [slots + 1]; positions: int64
 *   [slots + 1]; outputs [batch, ...] likewise, kernel_index int32 [3, batch].
 * voxcpm_step_scatter writes, per batch row b of slot s:
 *   lm_hidden[s] = next_lm[b]; residual_hidden[s] = next_residual[b]; prev_patch[s] = patch[b];
 *   positions[s] = lengths[b] (0 for the scratch slot);
 *   out[b] = (patch[b] as fp32, then 1 where torch.argmax(stop_logits[b]) == 1 else 0).
 *   next_lm, next_residual: [batch, hidden]; patch: [batch, patch, feat]; stop_logits: [batch, 2];
 *   lengths: int32 [batch]; out: fp32 [batch, patch * feat + 1].
 * Pure copies (the outputs are bit for bit PyTorch's indexing). hidden and patch * feat <= 65536.
 */
VOXCPM_API int voxcpm_step_gather(const int64_t* index, const void* ring, const void* lm_hidden,
                                  const void* residual_hidden, const void* prev_patch, const float* cfg_value,
                                  const int64_t* positions, void* noise, void* lm_out, void* residual_out,
                                  void* prev_out, float* cfg_out, int32_t* kernel_index, int64_t batch,
                                  int64_t slots, int64_t block, int64_t hidden, int64_t patch, int64_t feat,
                                  int dtype, void* stream);
VOXCPM_API int voxcpm_step_scatter(const int64_t* index, const int32_t* lengths, const void* next_lm,
                                   const void* next_residual, const void* patch, const void* stop_logits,
                                   void* lm_hidden, void* residual_hidden, void* prev_patch, int64_t* positions,
                                   float* out, int64_t batch, int64_t slots, int64_t hidden, int64_t patch_size,
                                   int64_t feat, int dtype, void* stream);

#ifdef __cplusplus
}
#endif

#endif /* VOXCPM_KERNELS_H */
