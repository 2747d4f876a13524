"""Decode attention over a per-slot KV cache (one query token per stream, grouped-query heads,
ragged lengths): CUDA op and reference.

Stream b attends to positions [0, lengths[b]) of cache slot slot_ids[b]; lengths include the token
just written by rope_kv_write. Streams with slot_ids < 0 or lengths <= 0 (padding rows) get zeros.
The kernel reads only the live rows; its launch shape depends on the batch alone, so one captured
CUDA graph serves every mix of lengths.
"""

from __future__ import annotations

import math
import os

import torch

from voxcpm_triton.ops import library as lib
from voxcpm_triton.ops.rope_kv_write import as_int32_index, rope_kv_write_ref
from voxcpm_triton.ops.row_scale import check_norm_input

# Measured on the H200 with the tensor-core kernel (perf/sweep_decode_attention.py, 300 cached keys,
# run 9 in perf/RESULTS.md): 8 splits are the best at 1-4 streams (4.8 against 5.8 us unsplit), more
# only add combine work.
DEFAULT_MAX_SPLITS = 8
# Blocks resident per multiprocessor at head_dim 128 (build with VOXCPM_PTXAS_VERBOSE=1): the
# tensor-core kernel uses 255 registers x 128 threads, the CUDA-core one 187 x 128, so two.
BLOCKS_PER_SM = 2
# A block's fixed cost (its first memory round trip, the merge of its warps) and the combine kernel's,
# relative to one block streaming a whole 300-key stream. Fitted to run 9's sweep, where one split
# was the best or within 0.6 us of it from 16 streams on (the first guess, 0.25 and no combine term,
# split 64 streams in two: 11.2 against 10.4 us); perf/sweep_decode_attention.py prints the measured
# best split count beside the default.
BLOCK_FIXED_COST = 1.0
COMBINE_COST = 0.5
# A grid of one split per stream runs in 8-warp blocks while it leaves at most one block per
# multiprocessor (kernels/decode_attention.cu mma_warps), so each warp walks only 2-3 steps of a
# 300-key stream. Once that grid covers more than an eighth of the multiprocessors, splitting costs
# more (the combine kernel, blocks sharing multiprocessors) than the shorter walk saves: run 76's
# sweep on the H200, 1 split against the model's 4-8 at 16-32 streams: 6.5-7.2 against 7.2-9.1 us
# at 300 keys, 3.5-3.6 against 6.0-6.6 at 60; at 1-8 streams 8 splits stay the best at 300 keys.
UNSPLIT_FROM_FILL = 1 / 8


def decode_attention_ref(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slot_ids: torch.Tensor,
                         lengths: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    batch, q_heads, head_dim = q.shape
    kv_heads = k_cache.shape[1]
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    out = torch.zeros_like(q)
    for b, (slot, length) in enumerate(zip(slot_ids.tolist(), lengths.tolist())):
        length = min(length, k_cache.shape[2])
        if slot < 0 or slot >= k_cache.shape[0] or length <= 0:
            continue
        keys = k_cache[slot, :, :length].float()  # [Hkv, n, d]
        values = v_cache[slot, :, :length].float()
        query = q[b].float().view(kv_heads, q_heads // kv_heads, head_dim)
        probs = torch.softmax(torch.einsum("hgd,hnd->hgn", query, keys) * scale, dim=-1)
        out[b] = torch.einsum("hgn,hnd->hgd", probs, values).reshape(q_heads, head_dim).to(q.dtype)
    return out


@torch.compiler.assume_constant_result
def default_num_splits(batch: int, q_heads: int, kv_heads: int, device_index: int) -> int:
    """Splits per stream for the grid of `batch` streams (splits_for_waves on this GPU's resident
    blocks). device_index -1: the current device."""
    group = q_heads // kv_heads
    heads_per_block = group if group <= 8 else 16
    blocks_per_split = batch * kv_heads * math.ceil(group / heads_per_block)
    index = torch.cuda.current_device() if device_index < 0 else device_index
    resident = BLOCKS_PER_SM * torch.cuda.get_device_properties(index).multi_processor_count
    return splits_for_waves(blocks_per_split, resident)


def splits_for_waves(blocks_per_split: int, resident_blocks: int) -> int:
    """The split count s in 1..DEFAULT_MAX_SPLITS with the least modelled time waves(s) * (1 / s +
    BLOCK_FIXED_COST) + COMBINE_COST when s > 1: the grid runs in waves(s) = ceil(s * blocks_per_split
    / resident_blocks) rounds of resident blocks, each costing its 1/s share of a stream's keys plus
    the fixed part. Small batches take many splits, batches whose unsplit grid covers more than
    UNSPLIT_FROM_FILL of the multiprocessors one; ties go to fewer splits."""
    if blocks_per_split > UNSPLIT_FROM_FILL * (resident_blocks // BLOCKS_PER_SM):
        return 1

    def cost(s: int) -> tuple[float, int]:
        waves = math.ceil(s * max(blocks_per_split, 1) / resident_blocks)
        return waves * (1.0 / s + BLOCK_FIXED_COST) + (COMBINE_COST if s > 1 else 0.0), s
    return min(range(1, DEFAULT_MAX_SPLITS + 1), key=cost)


def _split_workspace(q: torch.Tensor, num_splits: int) -> tuple[torch.Tensor, int]:
    """The kernels' scratch for num_splits partial results per query head of q [B, Hq, d], and its
    size in bytes (at least one byte is allocated, so its pointer is never null)."""
    batch, q_heads, head_dim = q.shape
    nbytes = lib.library().voxcpm_decode_attention_workspace_bytes(batch, q_heads, head_dim, num_splits)
    return torch.empty(max(nbytes, 1), dtype=torch.uint8, device=q.device), nbytes


def _check_alignment(*named: tuple[str, torch.Tensor]) -> None:
    for name, t in named:
        vec = 16 // t.element_size()  # the kernel reads rows as 16-byte vectors
        lib.require(t.data_ptr() % 16 == 0 and all(s % vec == 0 for s in t.stride()[:-1]),
                    f"{name} must be 16-byte aligned with strides that are multiples of {vec} elements, got "
                    f"strides {t.stride()}")


@torch.library.custom_op(
    "voxcpm::decode_attention", mutates_args=(),
    schema="(Tensor q, Tensor k_cache, Tensor v_cache, Tensor slot_ids, Tensor lengths, float scale, "
           "int num_splits) -> Tensor")
def _decode_attention_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slot_ids: torch.Tensor,
                         lengths: torch.Tensor, scale: float, num_splits: int) -> torch.Tensor:
    if not lib.kernel_ready(q):
        return decode_attention_ref(q, k_cache, v_cache, slot_ids, lengths, scale)
    batch, q_heads, head_dim = q.shape
    _check_alignment(("q", q), ("k_cache", k_cache), ("v_cache", v_cache))
    kernels = lib.library()
    out = torch.empty_like(q)
    workspace, nbytes = _split_workspace(q, num_splits)
    with lib.device_of(q):
        error = kernels.voxcpm_decode_attention(
            lib.ptr(q), lib.ptr(k_cache), lib.ptr(v_cache), k_cache.stride(0), k_cache.stride(1),
            k_cache.stride(2), k_cache.shape[0], k_cache.shape[2], lib.ptr(slot_ids), lib.ptr(lengths),
            lib.ptr(out), lib.ptr(workspace), nbytes, batch, q_heads, k_cache.shape[1], head_dim, num_splits,
            scale, lib.dtype_code(q), lib.stream_of(q))
    lib.check(error, "decode_attention")
    return out


@_decode_attention_op.register_fake
def _(q, k_cache, v_cache, slot_ids, lengths, scale, num_splits) -> torch.Tensor:
    return torch.empty_like(q)


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slot_ids: torch.Tensor,
                     lengths: torch.Tensor, scale: float | None = None, num_splits: int | None = None) -> torch.Tensor:
    """q [B, Hq, d] (d in {64, 128} on the GPU); caches [slots, Hkv, max_context, d] (last dimension
    contiguous, e.g. KVCache.k[layer]); slot_ids, lengths int32 [B]. Returns [B, Hq, d]; scale
    defaults to 1/sqrt(d)."""
    lib.require(q.dim() == 3, f"q must be [batch, q_heads, head_dim], got {tuple(q.shape)}")
    batch, q_heads, head_dim = q.shape
    lib.require(q.is_contiguous(), f"q must be contiguous, got strides {q.stride()}")
    lib.require(k_cache.dim() == 4 and k_cache.shape[3] == head_dim and k_cache.shape[1] > 0
                and q_heads % k_cache.shape[1] == 0,
                f"k_cache must be [slots, kv_heads, max_context, {head_dim}] with kv_heads dividing {q_heads}, "
                f"got {tuple(k_cache.shape)}")
    lib.require(v_cache.shape == k_cache.shape and v_cache.stride() == k_cache.stride(),
                f"v_cache must have k_cache's shape and strides {tuple(k_cache.shape)} {k_cache.stride()}, "
                f"got {tuple(v_cache.shape)} {v_cache.stride()}")
    for name, t in (("k_cache", k_cache), ("v_cache", v_cache)):
        lib.require(t.dtype == q.dtype and t.device == q.device and t.stride(-1) == 1,
                    f"{name} must be {q.dtype} on {q.device} with a contiguous last dimension")
    if lib.kernel_ready(q):
        lib.require(head_dim in (64, 128), f"head_dim must be 64 or 128 on the GPU, got {head_dim}")
        lib.require(batch <= 65535, f"batch must be <= 65535, got {batch}")
    slot_ids = as_int32_index(slot_ids, "slot_ids", batch, q.device)
    lengths = as_int32_index(lengths, "lengths", batch, q.device)
    if num_splits is None:
        device_index = -1 if q.device.index is None else q.device.index
        num_splits = default_num_splits(batch, q_heads, k_cache.shape[1], device_index) if lib.kernel_ready(q) else 1
    lib.require(1 <= num_splits <= 256, f"num_splits must be in [1, 256], got {num_splits}")
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    return torch.ops.voxcpm.decode_attention(q, k_cache, v_cache, slot_ids, lengths, scale, num_splits)


# rope_kv_write folded into the attention kernel (voxcpm_decode_attention_rope): at one stream the two
# kernels' boundary cost ~3.6% of the step (perf/RESULTS.md run 94). VOXCPM_DECODE_ROPE=0 keeps them
# apart (A/B timing).
def rope_decode_attention_ref(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                              v_cache: torch.Tensor, positions: torch.Tensor, slot_ids: torch.Tensor,
                              lengths: torch.Tensor, cos: torch.Tensor | None, sin: torch.Tensor | None,
                              norm_input: torch.Tensor | None, norm_eps: float, scale: float) -> torch.Tensor:
    rotated = rope_kv_write_ref(q, k, v, k_cache, v_cache, positions, slot_ids, cos, sin, norm_input, norm_eps)
    return decode_attention_ref(rotated, k_cache, v_cache, slot_ids, lengths, scale)


def rope_decode_takes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                      cos: torch.Tensor | None) -> bool:
    """Whether rope_decode_attention serves these tensors: the tensor-core kernel's dtypes and head
    sizes, q / k / v rows of one projection output with contiguous heads, 16-byte aligned."""
    if (os.environ.get("VOXCPM_DECODE_ROPE", "1") == "0" or os.environ.get("VOXCPM_DECODE_ATTENTION_MMA", "1") == "0"
            or torch.compiler.is_compiling() or not lib.kernel_ready(q) or q.dtype not in (torch.bfloat16, torch.float16)
            or torch.cuda.get_device_capability(q.device)[0] < 8):
        return False
    head_dim = q.shape[-1]
    rows_fit = all(t.dim() == 3 and t.dtype == q.dtype and t.device == q.device and t.stride(2) == 1
                   and t.stride(1) == head_dim and t.stride(0) % 8 == 0 and t.data_ptr() % 16 == 0 for t in (q, k, v))
    return (head_dim in (64, 128) and rows_fit and k.stride(0) == v.stride(0) and k_cache.dtype == q.dtype
            and (cos is None or (cos.dtype == torch.float32 and cos.is_contiguous() and cos.shape[-1] == head_dim
                                 and cos.data_ptr() % 16 == 0)))


@torch.library.custom_op(
    "voxcpm::rope_decode_attention", mutates_args=("k_cache", "v_cache"),
    schema="(Tensor q, Tensor k, Tensor v, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor positions, "
           "Tensor slot_ids, Tensor lengths, Tensor? cos, Tensor? sin, Tensor? norm_input, float norm_eps, "
           "float scale, int num_splits) -> Tensor")
def _rope_decode_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                              v_cache: torch.Tensor, positions: torch.Tensor, slot_ids: torch.Tensor,
                              lengths: torch.Tensor, cos: torch.Tensor | None, sin: torch.Tensor | None,
                              norm_input: torch.Tensor | None, norm_eps: float, scale: float,
                              num_splits: int) -> torch.Tensor:
    if not lib.kernel_ready(q):
        return rope_decode_attention_ref(q, k, v, k_cache, v_cache, positions, slot_ids, lengths, cos, sin,
                                         norm_input, norm_eps, scale)
    batch, q_heads, head_dim = q.shape
    _check_alignment(("k_cache", k_cache), ("v_cache", v_cache))
    kernels = lib.library()
    out = q.new_empty((batch, q_heads, head_dim))
    workspace, nbytes = _split_workspace(q, num_splits)
    with lib.device_of(q):
        error = kernels.voxcpm_decode_attention_rope(
            lib.ptr(q), q.stride(0), lib.ptr(k), lib.ptr(v), k.stride(0), lib.ptr(cos), lib.ptr(sin),
            0 if cos is None else cos.shape[0], lib.ptr(positions), lib.ptr(norm_input),
            0 if norm_input is None else norm_input.shape[1], norm_eps, lib.ptr(k_cache), lib.ptr(v_cache),
            k_cache.stride(0), k_cache.stride(1), k_cache.stride(2), k_cache.shape[0], k_cache.shape[2],
            lib.ptr(slot_ids), lib.ptr(lengths), lib.ptr(out), lib.ptr(workspace), nbytes, batch, q_heads,
            k_cache.shape[1], head_dim, num_splits, scale, lib.dtype_code(q), lib.stream_of(q))
    lib.check(error, "decode_attention_rope")
    return out


@_rope_decode_attention_op.register_fake
def _(q, k, v, k_cache, v_cache, positions, slot_ids, lengths, cos, sin, norm_input, norm_eps, scale,
      num_splits) -> torch.Tensor:
    return q.new_empty(q.shape)


def rope_decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor,
                          v_cache: torch.Tensor, positions: torch.Tensor, slot_ids: torch.Tensor,
                          lengths: torch.Tensor, cos: torch.Tensor | None = None, sin: torch.Tensor | None = None,
                          norm_input: torch.Tensor | None = None, norm_eps: float = 1e-6) -> torch.Tensor:
    """rope_kv_write then decode_attention in one kernel: q [B, Hq, d], k / v [B, Hkv, d] (views of
    one projection output, as rope_kv_write takes them), the caches, positions, slot ids and lengths
    as those two ops take them (lengths including this token); cos / sin / norm_input as
    rope_kv_write's. Writes this token's rotated k and v into the caches; returns [B, Hq, d]. Only
    where rope_decode_takes says so."""
    lib.require(rope_decode_takes(q, k, v, k_cache, cos), "rope_decode_attention does not take these tensors")
    batch, q_heads, head_dim = q.shape
    lib.require(k.shape == v.shape == (batch, k_cache.shape[1], head_dim) and q_heads % k_cache.shape[1] == 0,
                f"k and v must be [{batch}, kv_heads, {head_dim}] with kv_heads dividing {q_heads}")
    lib.require(v_cache.shape == k_cache.shape and v_cache.stride() == k_cache.stride() and k_cache.stride(-1) == 1
                and k_cache.shape[3] == head_dim and v_cache.dtype == q.dtype,
                f"the caches must be [slots, kv_heads, max_context, {head_dim}] of {q.dtype}, alike")
    lib.require((cos is None) == (sin is None), "cos and sin must both be given or both be None")
    if norm_input is not None:
        check_norm_input(norm_input, (batch,), q)
    slot_ids = as_int32_index(slot_ids, "slot_ids", batch, q.device)
    positions = as_int32_index(positions, "positions", batch, q.device)
    lengths = as_int32_index(lengths, "lengths", batch, q.device)
    device_index = -1 if q.device.index is None else q.device.index
    num_splits = default_num_splits(batch, q_heads, k_cache.shape[1], device_index)
    return torch.ops.voxcpm.rope_decode_attention(q, k, v, k_cache, v_cache, positions, slot_ids, lengths, cos, sin,
                                                  norm_input, float(norm_eps), 1.0 / math.sqrt(head_dim), num_splits)
