"""Rotary embedding (LongRoPE tables) fused with the KV-cache write: CUDA op and reference.

Cache layout is the one of voxcpm_triton.engine.slots.KVCache, one layer at a time:
k_cache / v_cache [slots, kv_heads, max_context, head_dim] (any strides, last dimension contiguous;
KVCache.k[layer] is such a view). Each token i writes its rotated k and its v at
cache[slot_ids[i], :, positions[i]] and gets its rotated q back. Tokens with slot_ids < 0 (padding
rows of a CUDA-graph batch bucket) or a position outside the cache write nothing.

`norm_input` serves an LM layer whose input RMSNorm weight is folded into its qkv weight
(fast_path.enable_folded_statistics): the GEMM then read the un-normed residual rows, and each
token's q, k and v still need that norm's statistic, which the op computes from the rows given and
applies before the rotation.
"""

from __future__ import annotations

import torch

from voxcpm_triton.ops import library as lib
from voxcpm_triton.ops.row_scale import check_norm_input, row_scale_ref


def rotate_ref(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE of x [..., d] by tables broadcastable to it, in fp32, rounded back to x's
    dtype (the references of rope_kv_write and short_attention)."""
    x32 = x.float()
    first, second = x32.chunk(2, dim=-1)
    return (x32 * cos + torch.cat((-second, first), dim=-1) * sin).to(x.dtype)


def rope_kv_write_ref(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                      v_cache: torch.Tensor, positions: torch.Tensor, slot_ids: torch.Tensor,
                      cos: torch.Tensor | None = None, sin: torch.Tensor | None = None,
                      norm_input: torch.Tensor | None = None, norm_eps: float = 1e-6) -> torch.Tensor:
    positions = positions.long()
    slot_ids = slot_ids.long()
    dtype = q.dtype
    if norm_input is not None:  # scaled in fp32, rounded once after the rotation
        scale = row_scale_ref(norm_input, norm_eps)[:, None, None]
        q, k, v = q.float() * scale, k.float() * scale, v.float() * scale
    if cos is not None:
        rows = positions.clamp(0, cos.shape[0] - 1)
        c, s = cos[rows][:, None, :], sin[rows][:, None, :]
        q_out, k_rot = rotate_ref(q, c, s).to(dtype), rotate_ref(k, c, s).to(dtype)
    else:
        q_out, k_rot = q.to(dtype, copy=True), k.to(dtype)
    v = v.to(dtype)
    valid = (slot_ids >= 0) & (slot_ids < k_cache.shape[0]) & (positions >= 0) & (positions < k_cache.shape[2])
    k_cache[slot_ids[valid], :, positions[valid]] = k_rot[valid]
    v_cache[slot_ids[valid], :, positions[valid]] = v[valid]
    return q_out.contiguous()


@torch.library.custom_op(
    "voxcpm::rope_kv_write", mutates_args=("k_cache", "v_cache"),
    schema="(Tensor q, Tensor k, Tensor v, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor positions, "
           "Tensor slot_ids, Tensor? cos, Tensor? sin, Tensor? norm_input, float norm_eps) -> Tensor")
def _rope_kv_write_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                      v_cache: torch.Tensor, positions: torch.Tensor, slot_ids: torch.Tensor,
                      cos: torch.Tensor | None, sin: torch.Tensor | None, norm_input: torch.Tensor | None,
                      norm_eps: float) -> torch.Tensor:
    if not lib.kernel_ready(q):
        return rope_kv_write_ref(q, k, v, k_cache, v_cache, positions, slot_ids, cos, sin, norm_input, norm_eps)
    tokens, q_heads, head_dim = q.shape
    q_out = q.new_empty((tokens, q_heads, head_dim))
    with lib.device_of(q):
        error = lib.library().voxcpm_rope_kv_write(
            lib.ptr(q), q.stride(0), q.stride(1), lib.ptr(k), k.stride(0), k.stride(1),
            lib.ptr(v), v.stride(0), v.stride(1), lib.ptr(q_out), lib.ptr(cos), lib.ptr(sin),
            0 if cos is None else cos.shape[0], lib.ptr(positions), lib.ptr(slot_ids),
            lib.ptr(k_cache), lib.ptr(v_cache), k_cache.stride(0), k_cache.stride(1), k_cache.stride(2),
            k_cache.shape[0], k_cache.shape[2], tokens, q_heads, k.shape[1], head_dim, lib.ptr(norm_input),
            0 if norm_input is None else norm_input.shape[1], norm_eps, lib.dtype_code(q), lib.stream_of(q))
    lib.check(error, "rope_kv_write")
    return q_out


@_rope_kv_write_op.register_fake
def _(q, k, v, k_cache, v_cache, positions, slot_ids, cos, sin, norm_input, norm_eps) -> torch.Tensor:
    return q.new_empty(q.shape)


def as_int32_index(t: torch.Tensor, name: str, length: int, device: torch.device) -> torch.Tensor:
    """Validates a per-token/per-stream index vector; int64 is converted (one extra copy: pass int32),
    saturating, so that an index past int32 stays out of range instead of wrapping into it."""
    lib.require(t.shape == (length,) and t.device == device and t.dtype in (torch.int32, torch.int64),
                f"{name} must be int32 [{length}] on {device}, got {tuple(t.shape)} {t.dtype} on {t.device}")
    if t.dtype == torch.int32:
        return t.contiguous()
    info = torch.iinfo(torch.int32)
    return t.clamp(info.min, info.max).to(torch.int32)


def rope_kv_write(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                  v_cache: torch.Tensor, positions: torch.Tensor, slot_ids: torch.Tensor,
                  cos: torch.Tensor | None = None, sin: torch.Tensor | None = None,
                  norm_input: torch.Tensor | None = None, norm_eps: float = 1e-6) -> torch.Tensor:
    """q [N, Hq, d], k/v [N, Hkv, d] (views into a fused qkv output are fine); caches [slots, Hkv,
    max_context, d]; positions, slot_ids int32 [N]; cos/sin float32 [table_len, d] (LongRoPE tables,
    e.g. LongRoPE.cos_table) or None for no rotation. Writes the caches in place; returns rotated q
    [N, Hq, d] contiguous. norm_input [N, hidden] (contiguous, q's dtype and device): token i's q, k
    and v are first scaled by 1 / sqrt(mean(norm_input[i]^2) + norm_eps), in fp32."""
    lib.require(q.dim() == 3 and k.dim() == 3 and v.dim() == 3,
                f"q, k, v must be [tokens, heads, head_dim], got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    tokens, _, head_dim = q.shape
    lib.require(head_dim % 2 == 0 and 2 <= head_dim <= 256, f"head_dim must be even in [2, 256], got {head_dim}")
    lib.require(k.shape[0] == tokens and k.shape[2] == head_dim and v.shape == k.shape,
                f"k and v must be [{tokens}, kv_heads, {head_dim}], got {tuple(k.shape)} and {tuple(v.shape)}")
    for name, t in (("q", q), ("k", k), ("v", v), ("k_cache", k_cache), ("v_cache", v_cache)):
        lib.require(t.dtype == q.dtype and t.device == q.device and t.stride(-1) == 1,
                    f"{name} must be {q.dtype} on {q.device} with a contiguous last dimension, got {t.dtype} "
                    f"on {t.device} strides {t.stride()}")
    lib.require(k_cache.dim() == 4 and k_cache.shape[1] == k.shape[1] and k_cache.shape[3] == head_dim,
                f"k_cache must be [slots, {k.shape[1]}, max_context, {head_dim}], got {tuple(k_cache.shape)}")
    lib.require(v_cache.shape == k_cache.shape and v_cache.stride() == k_cache.stride(),
                f"v_cache must have k_cache's shape and strides {tuple(k_cache.shape)} {k_cache.stride()}, "
                f"got {tuple(v_cache.shape)} {v_cache.stride()}")
    lib.require((cos is None) == (sin is None), "cos and sin must both be given or both be None")
    lib.require(cos is None or cos.shape == sin.shape,
                f"cos and sin must have one shape, got {None if cos is None else tuple(cos.shape)} and "
                f"{None if sin is None else tuple(sin.shape)}")
    if cos is not None:
        for name, t in (("cos", cos), ("sin", sin)):
            lib.require(t.dim() == 2 and t.shape[1] == head_dim and t.shape[0] > 0 and t.dtype == torch.float32
                        and t.device == q.device and t.is_contiguous(),
                        f"{name} must be contiguous float32 [positions, {head_dim}] on {q.device}, got "
                        f"{tuple(t.shape)} {t.dtype} on {t.device}")
    if norm_input is not None:
        check_norm_input(norm_input, (tokens,), q)
        lib.require(norm_eps > 0.0, f"norm_eps must be > 0, got {norm_eps}")
    positions = as_int32_index(positions, "positions", tokens, q.device)
    slot_ids = as_int32_index(slot_ids, "slot_ids", tokens, q.device)
    return torch.ops.voxcpm.rope_kv_write(q, k, v, k_cache, v_cache, positions, slot_ids, cos, sin, norm_input,
                                          float(norm_eps))
