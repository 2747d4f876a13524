"""A stand-in for the three flash-attn functions Nano-vLLM-VoxCPM imports, written with plain torch.

flash-attn has no wheel for the H200 machine's torch 2.11 + CUDA 13 and the machine cannot build it,
so the Nano-vLLM-VoxCPM baseline runs with this module first on PYTHONPATH. Only the call patterns
nanovllm_voxcpm/layers/attention.py uses are covered; anything else raises NotImplementedError.

- flash_attn_func (non-causal LocEnc / LocDiT attention, fixed length): one SDPA call.
- flash_attn_varlen_func (prefill, ragged; optionally over the paged cache for prefix-cache hits):
  sequences padded into one batch and one masked SDPA call; host reads of cu_seqlens are fine
  because nano runs prefill eagerly.
- flash_attn_with_kvcache (decode, one query per sequence over the paged cache): gathers each
  sequence's pages (block_table width x block size keys, i.e. max_model_len keys inside nano's CUDA
  graphs) and does masked matmul-softmax-matmul with grouped heads; no host sync, so nano can
  capture it in CUDA graphs. Its cost grows with the block-table width, not the live length, which is
  why perf/baselines/nanovllm_bench.py keeps max_model_len small.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

__version__ = "0.0.0+sdpa-standin"


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    """[N, Hk, L, D] -> [N, Hk * groups, L, D] (grouped-query heads share their key/value head)."""
    return x if groups == 1 else torch.repeat_interleave(x, groups, dim=1)


def _check_kwargs(name: str, kwargs: dict) -> None:
    def is_default(value) -> bool:
        return value is None or (not isinstance(value, torch.Tensor) and value in (False, 0.0, (-1, -1)))

    unsupported = [key for key, value in kwargs.items() if not is_default(value)]
    if unsupported:
        raise NotImplementedError(f"{name} stand-in does not support {unsupported}")


def flash_attn_func(q, k, v, dropout_p=0.0, softmax_scale=None, causal=False, **kwargs):
    """q [B, Sq, H, D], k/v [B, Sk, Hk, D] -> [B, Sq, H, D]."""
    _check_kwargs("flash_attn_func", {"dropout_p": dropout_p, **kwargs})
    if causal and q.shape[1] != k.shape[1]:
        raise NotImplementedError("flash_attn_func stand-in: causal with Sq != Sk")
    groups = q.shape[2] // k.shape[2]
    qt, kt, vt = (t.transpose(1, 2) for t in (q, k, v))
    out = F.scaled_dot_product_attention(qt, _repeat_kv(kt, groups), _repeat_kv(vt, groups),
                                         scale=softmax_scale, is_causal=bool(causal))
    return out.transpose(1, 2).contiguous()  # callers .view() it, as flash-attn's output allows


def _token_index(cu: list[int], width: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sequence, the flat indices of its tokens padded to `width`, and which of them are real."""
    starts = torch.tensor(cu[:-1], device=device).unsqueeze(1)
    lengths = torch.tensor([b - a for a, b in zip(cu[:-1], cu[1:])], device=device).unsqueeze(1)
    offsets = torch.arange(width, device=device).unsqueeze(0)
    valid = offsets < lengths
    return torch.where(valid, starts + offsets, torch.zeros_like(offsets)), valid


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False, block_table=None, **kwargs):
    """q [Tq, H, D]; k/v [Tk, Hk, D], or paged caches [blocks, block_size, Hk, D] with block_table."""
    _check_kwargs("flash_attn_varlen_func", {"dropout_p": dropout_p, **kwargs})
    cu_q = cu_seqlens_q.tolist()
    cu_k = cu_seqlens_k.tolist()
    n = len(cu_q) - 1
    len_q = torch.tensor([b - a for a, b in zip(cu_q[:-1], cu_q[1:])], device=q.device)
    len_k = torch.tensor([b - a for a, b in zip(cu_k[:-1], cu_k[1:])], device=q.device)
    q_index, q_valid = _token_index(cu_q, max_seqlen_q, q.device)
    if block_table is None:
        k_index, _ = _token_index(cu_k, max_seqlen_k, q.device)
        k_pad, v_pad = k[k_index], v[k_index]  # [N, Lk, Hk, D]
    else:
        block_size = k.shape[1]
        t = torch.arange(max_seqlen_k, device=q.device)
        pages = block_table[:, t // block_size].long().clamp(min=0)
        flat = pages * block_size + t % block_size
        k_pad = k.reshape(-1, *k.shape[2:])[flat]
        v_pad = v.reshape(-1, *v.shape[2:])[flat]
    groups = q.shape[1] // k_pad.shape[2]
    q_pad = q[q_index].transpose(1, 2)  # [N, H, Lq, D]
    k_pad = _repeat_kv(k_pad.transpose(1, 2), groups)
    v_pad = _repeat_kv(v_pad.transpose(1, 2), groups)
    key_pos = torch.arange(max_seqlen_k, device=q.device).view(1, 1, -1)
    mask = key_pos < len_k.view(n, 1, 1)
    if causal:
        # flash-attn aligns the causal mask bottom-right: query j sits at position len_k - len_q + j.
        query_pos = (len_k - len_q).view(n, 1, 1) + torch.arange(max_seqlen_q, device=q.device).view(1, -1, 1)
        mask = mask & (key_pos <= query_pos)
    else:
        mask = mask.expand(n, max_seqlen_q, max_seqlen_k)
    out = F.scaled_dot_product_attention(q_pad, k_pad, v_pad, attn_mask=mask.unsqueeze(1), scale=softmax_scale)
    return out.transpose(1, 2)[q_valid]


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens: Optional[torch.Tensor] = None, cache_batch_idx=None,
                            cache_leftpad=None, block_table=None, softmax_scale=None, causal=False,
                            **kwargs):
    """q [B, Sq, H, D] (nano: Sq = 1); caches [blocks, block_size, Hk, D] with block_table [B, W],
    or [B, L, Hk, D] without; cache_seqlens [B] counts the keys each query sees (new token included)."""
    _check_kwargs("flash_attn_with_kvcache", {"k": k, "v": v, "rotary_cos": rotary_cos,
                                              "rotary_sin": rotary_sin, "cache_batch_idx": cache_batch_idx,
                                              "cache_leftpad": cache_leftpad, **kwargs})
    if cache_seqlens is None:
        raise NotImplementedError("flash_attn_with_kvcache stand-in needs cache_seqlens")
    batch, sq, heads, dim = q.shape
    if block_table is not None:
        keys = k_cache[block_table.long().clamp(min=0)].flatten(1, 2)  # [B, W * block_size, Hk, D]
        values = v_cache[block_table.long().clamp(min=0)].flatten(1, 2)
    else:
        keys, values = k_cache, v_cache
    kv_heads = keys.shape[2]
    groups = heads // kv_heads
    scale = softmax_scale if softmax_scale is not None else dim ** -0.5
    qg = q.reshape(batch, sq, kv_heads, groups, dim).permute(0, 2, 1, 3, 4).reshape(batch, kv_heads, sq * groups, dim)
    kt = keys.permute(0, 2, 3, 1)  # [B, Hk, D, L]
    scores = torch.matmul(qg, kt).float() * scale  # [B, Hk, Sq*G, L]
    key_pos = torch.arange(keys.shape[1], device=q.device).view(1, 1, 1, -1)
    # Rows nano pads a graph bucket with may say 0 keys; one visible key keeps their softmax finite.
    limit = cache_seqlens.clamp(min=1).view(batch, 1, 1, 1)
    if causal and sq > 1:
        query_pos = (cache_seqlens.view(batch, 1) - sq
                     + torch.arange(sq, device=q.device).view(1, -1)).repeat_interleave(groups, dim=1)
        visible = (key_pos < limit) & (key_pos <= query_pos.view(batch, 1, sq * groups, 1))
    else:
        visible = key_pos < limit
    probs = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1).to(values.dtype)
    out = torch.matmul(probs, values.permute(0, 2, 1, 3))  # [B, Hk, Sq*G, D]
    out = out.reshape(batch, kv_heads, sq, groups, dim).permute(0, 2, 1, 3, 4)
    return out.reshape(batch, sq, heads, dim).contiguous()
