"""Whole-sequence attention over short sequences (LocEnc, LocDiT) from the fused qkv projection
output: CUDA op and PyTorch reference.

One op replaces RoPE, the head transposes, SDPA and the transpose back: qkv [N * T, (Hq + 2 Hkv) d]
(F.linear with the [q; k; v] weight) in, [N * T, Hq d] (o_proj's input) out. Every sequence has
positions 0..T-1, so row t of the LongRoPE tables rotates token t. Rotated q and k are rounded to
the element type as `apply_rope` rounds them; logits, softmax and the weighted sum are fp32.

`row_scale` serves layers whose RMSNorm weight is folded into the qkv weight
(fast_path.enable_folded_norms): the GEMM then read un-normed rows, and token t's q, k and v still
need the row's statistic (ops.row_scale), which the op applies as it loads them. Given the
norm's input rows instead (`norm_input`), the op computes that statistic itself, and the separate
row_scale kernel between the GEMM and this one goes away.
"""

from __future__ import annotations

import math

import torch

from voxcpm_triton.ops import library as lib
from voxcpm_triton.ops.rope_kv_write import rotate_ref
from voxcpm_triton.ops.row_scale import check_norm_input, check_row_scale, row_scale_ref

MAX_SEQ_LEN = 32  # the kernel holds a sequence's keys in one warp's lanes
KERNEL_HEAD_DIMS = (64, 128)


def short_attention_ref(qkv: torch.Tensor, seq_len: int, q_heads: int, kv_heads: int,
                        cos: torch.Tensor | None = None, sin: torch.Tensor | None = None,
                        scale: float | None = None, causal: bool = False,
                        row_scale: torch.Tensor | None = None, norm_input: torch.Tensor | None = None,
                        norm_eps: float = 1e-6) -> torch.Tensor:
    if norm_input is not None:
        row_scale = row_scale_ref(norm_input, norm_eps)
    tokens, width = qkv.shape
    head_dim = width // (q_heads + 2 * kv_heads)
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    heads = qkv.view(tokens // seq_len, seq_len, q_heads + 2 * kv_heads, head_dim).transpose(1, 2)
    q, k, v = heads.split((q_heads, kv_heads, kv_heads), dim=1)  # [N, H, T, d]
    if row_scale is not None:
        # As the kernel: q and k scaled in fp32 and rounded once (after the rotation, if any); v
        # scaled in fp32 and never rounded (the kernel scales the probabilities instead).
        factor = row_scale.view(tokens // seq_len, 1, seq_len, 1)
        q, k, v = q.float() * factor, k.float() * factor, v.float() * factor
        if cos is None:
            q, k = q.to(qkv.dtype), k.to(qkv.dtype)
    if cos is not None:
        c, s = cos[:seq_len], sin[:seq_len]
        q, k = rotate_ref(q, c, s).to(qkv.dtype), rotate_ref(k, c, s).to(qkv.dtype)
    group = q_heads // kv_heads
    k = k.float().repeat_interleave(group, dim=1)
    v = v.float().repeat_interleave(group, dim=1)
    logits = torch.matmul(q.float(), k.transpose(-1, -2)) * scale
    if causal:
        future = torch.ones(seq_len, seq_len, dtype=torch.bool, device=qkv.device).triu(1)
        logits = logits.masked_fill(future, float("-inf"))
    out = torch.matmul(torch.softmax(logits, dim=-1), v).to(qkv.dtype)
    return out.transpose(1, 2).reshape(tokens, q_heads * head_dim)


@torch.library.custom_op(
    "voxcpm::short_attention", mutates_args=(),
    schema="(Tensor qkv, int seq_len, int q_heads, int kv_heads, Tensor? cos, Tensor? sin, float scale, "
           "bool causal, Tensor? row_scale, Tensor? norm_input, float norm_eps) -> Tensor")
def _short_attention_op(qkv: torch.Tensor, seq_len: int, q_heads: int, kv_heads: int, cos: torch.Tensor | None,
                        sin: torch.Tensor | None, scale: float, causal: bool, row_scale: torch.Tensor | None,
                        norm_input: torch.Tensor | None, norm_eps: float) -> torch.Tensor:
    if not lib.kernel_ready(qkv):
        return short_attention_ref(qkv, seq_len, q_heads, kv_heads, cos, sin, scale, causal, row_scale, norm_input,
                                   norm_eps)
    # Here rather than in the wrapper: torch.compile traces the wrapper with tensors that have no address.
    for name, t in (("qkv", qkv), ("cos", cos), ("sin", sin)):
        lib.require(t is None or t.data_ptr() % 16 == 0, f"{name} must start on a 16-byte boundary")
    tokens, width = qkv.shape
    head_dim = width // (q_heads + 2 * kv_heads)
    out = qkv.new_empty((tokens, q_heads * head_dim))
    with lib.device_of(qkv):
        error = lib.library().voxcpm_short_attention(
            lib.ptr(qkv), lib.ptr(cos), lib.ptr(sin), 0 if cos is None else cos.shape[0], lib.ptr(row_scale),
            lib.ptr(norm_input), 0 if norm_input is None else norm_input.shape[1], norm_eps, lib.ptr(out),
            tokens // seq_len, seq_len, q_heads, kv_heads, head_dim, scale, int(causal), lib.dtype_code(qkv),
            lib.stream_of(qkv))
    lib.check(error, "short_attention")
    return out


@_short_attention_op.register_fake
def _(qkv, seq_len, q_heads, kv_heads, cos, sin, scale, causal, row_scale, norm_input, norm_eps) -> torch.Tensor:
    head_dim = qkv.shape[1] // (q_heads + 2 * kv_heads)
    return qkv.new_empty((qkv.shape[0], q_heads * head_dim))


def short_attention(qkv: torch.Tensor, seq_len: int, q_heads: int, kv_heads: int,
                    cos: torch.Tensor | None = None, sin: torch.Tensor | None = None,
                    scale: float | None = None, causal: bool = False,
                    row_scale: torch.Tensor | None = None, norm_input: torch.Tensor | None = None,
                    norm_eps: float = 1e-6) -> torch.Tensor:
    """qkv [N * seq_len, (q_heads + 2 * kv_heads) * d] contiguous (q heads, then k, then v heads);
    cos/sin float32 [>= seq_len, d] LongRoPE tables (row t rotates token t) or None for no rotation.
    Returns softmax(q k^T * scale) v over each whole sequence (keys up to the query when causal) as
    [N * seq_len, q_heads * d]; scale defaults to 1/sqrt(d). seq_len <= 32; d in {64, 128} on the GPU.
    row_scale: float32 [N * seq_len] or None; token r's q, k and v rows are multiplied by row_scale[r]
    first (in float32).
    norm_input: [N * seq_len, hidden] of qkv's dtype, or None: instead of row_scale, the op computes
    it from these rows (the RMSNorm statistic 1 / sqrt(mean(x^2) + norm_eps), as ops.row_scale does,
    bit for bit on the GPU) in the same kernel. The kernel reads them before the kernel launched just
    before it has ended: they may be what the qkv GEMM read, never what it wrote."""
    lib.require(1 <= seq_len <= MAX_SEQ_LEN,
                f"seq_len must be in [1, {MAX_SEQ_LEN}] (longer sequences: use scaled_dot_product_attention), "
                f"got {seq_len}")
    lib.require(q_heads > 0 and kv_heads > 0 and q_heads % kv_heads == 0,
                f"q_heads must be a positive multiple of kv_heads, got q_heads={q_heads} kv_heads={kv_heads}")
    lib.require(qkv.dim() == 2 and qkv.is_contiguous(),
                f"qkv must be a contiguous [tokens, width] tensor, got shape {tuple(qkv.shape)} strides {qkv.stride()}")
    tokens, width = qkv.shape
    lib.require(tokens % seq_len == 0, f"qkv's {tokens} rows must be whole sequences of seq_len={seq_len}")
    heads = q_heads + 2 * kv_heads
    lib.require(width % heads == 0 and (width // heads) % 2 == 0,
                f"qkv's width must be (q_heads + 2 * kv_heads) = {heads} times an even head_dim, got {width}")
    head_dim = width // heads
    lib.require((cos is None) == (sin is None), "cos and sin must both be given or both be None")
    if cos is not None:
        for name, t in (("cos", cos), ("sin", sin)):
            lib.require(t.dim() == 2 and t.shape[0] >= seq_len and t.shape[1] == head_dim and t.dtype == torch.float32
                        and t.device == qkv.device and t.is_contiguous(),
                        f"{name} must be contiguous float32 [>= {seq_len}, {head_dim}] on {qkv.device}, got "
                        f"{tuple(t.shape)} {t.dtype} on {t.device}")
    if lib.kernel_ready(qkv):
        lib.require(head_dim in KERNEL_HEAD_DIMS, f"head_dim must be 64 or 128 on the GPU, got {head_dim}")
        lib.require(q_heads <= 65535 and tokens // seq_len <= 2**31 - 1,
                    f"at most 65535 q_heads and 2**31 - 1 sequences, got {q_heads} and {tokens // seq_len}")
    if row_scale is not None:
        check_row_scale(row_scale, tokens, qkv.device)
    if norm_input is not None:
        lib.require(row_scale is None, "give row_scale or norm_input, not both")
        check_norm_input(norm_input, (tokens,), qkv)
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    return torch.ops.voxcpm.short_attention(qkv, seq_len, q_heads, kv_heads, cos, sin, scale, bool(causal), row_scale,
                                            norm_input, float(norm_eps))
