"""rope_decode_attention (rope_kv_write folded into the tensor-core decode attention kernel) against
its reference and against the two kernels it replaces, on VoxCPM2's LM shapes (16 q / 2 kv heads of
128) and heads of 64: 1, 3 and 64 streams (split and unsplit grids), ragged lengths with stale NaN
rows past them, a padding row, a position the attention does not read, with and without RoPE tables
and a folded norm's statistic, bf16 and fp16; inside a replayed CUDA graph; and the LM decode that
routes to it.

Tolerances: tests/gpu/op_checks.py's per dtype. Without a norm statistic the cache rows are the
unfused kernels' bit for bit (same fp32 expressions); with one the statistic's block sum runs over
another thread count, so they may differ by a rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.gpu.op_checks import DEVICE, close, randn
from tests.gpu.test_short_attention_gpu import longrope_like_tables
from voxcpm_triton import ops
from voxcpm_triton.ops import library

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

MAX_LEN = 320


@pytest.fixture(scope="module", autouse=True)
def kernels_loaded():
    if torch.cuda.is_available():
        assert library.library() is not None, f"kernels library not loaded ({library.library_status()}); " \
                                              "build it with build/build_kernels.sh"


def make_case(batch: int, dtype: torch.dtype, head_dim: int = 128, q_heads: int = 16, kv_heads: int = 2,
              rope: bool = True, norm: bool = False, seed: int = 0):
    """qkv rows and caches for `batch` streams on shuffled slots; stream 1 (if any) is a padding row,
    stream 2 (if any) writes a position past its length (not read). Cache rows past every live
    length and past this token's position are NaN."""
    g = torch.Generator().manual_seed(seed)
    width = (q_heads + 2 * kv_heads) * head_dim
    qkv = randn(batch, width, dtype=dtype, seed=seed + 1)
    slots = batch + 3
    k_cache = randn(slots, kv_heads, MAX_LEN, head_dim, dtype=dtype, seed=seed + 2)
    v_cache = randn(slots, kv_heads, MAX_LEN, head_dim, dtype=dtype, seed=seed + 3)
    lengths = torch.randint(1, MAX_LEN, (batch,), generator=g)
    lengths[0] = MAX_LEN if batch > 3 else lengths[0]
    positions = lengths - 1
    slot_ids = torch.randperm(slots, generator=g)[:batch].int()
    if batch > 1:
        slot_ids[1] = -1
    if batch > 2:
        positions[2] = lengths[2]  # written, not read
    for b in range(batch):
        start = int(lengths[b]) if b != 2 else int(lengths[b]) + 1
        if slot_ids[b] >= 0:
            k_cache[slot_ids[b], :, start:] = float("nan")
            v_cache[slot_ids[b], :, start:] = float("nan")
    q = qkv[:, :q_heads * head_dim].view(batch, q_heads, head_dim)
    k = qkv[:, q_heads * head_dim:(q_heads + kv_heads) * head_dim].view(batch, kv_heads, head_dim)
    v = qkv[:, (q_heads + kv_heads) * head_dim:].view(batch, kv_heads, head_dim)
    cos, sin = longrope_like_tables(MAX_LEN + 4, head_dim) if rope else (None, None)
    norm_input = randn(batch, 2048, dtype=dtype, seed=seed + 4) if norm else None
    index = (slot_ids.to(DEVICE), positions.int().to(DEVICE), lengths.int().to(DEVICE))
    return q, k, v, k_cache, v_cache, index, cos, sin, norm_input


def run_three_ways(q, k, v, k_cache, v_cache, index, cos, sin, norm_input):
    slot_ids, positions, lengths = index
    caches = {name: (k_cache.clone(), v_cache.clone()) for name in ("fused", "kernels", "reference")}
    assert ops.rope_decode_takes(q, k, v, k_cache, cos)
    fused = ops.rope_decode_attention(q, k, v, *caches["fused"], positions, slot_ids, lengths, cos, sin, norm_input,
                                      1e-5)
    rotated = ops.rope_kv_write(q, k, v, *caches["kernels"], positions, slot_ids, cos, sin, norm_input, 1e-5)
    kernels = ops.decode_attention(rotated, *caches["kernels"], slot_ids, lengths)
    reference = ops.rope_decode_attention_ref(q, k, v, *caches["reference"], positions, slot_ids, lengths, cos, sin,
                                              norm_input, 1e-5, q.shape[-1] ** -0.5)
    return fused, kernels, reference, caches


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16))
@pytest.mark.parametrize("batch", (1, 3, 64))
@pytest.mark.parametrize(("rope", "norm"), ((True, False), (False, False), (True, True)))
@pytest.mark.parametrize("head_dim", (128, 64))
def test_matches_reference_and_the_two_kernels_it_replaces(dtype, batch, rope, norm, head_dim):
    case = make_case(batch, dtype, head_dim=head_dim, rope=rope, norm=norm, seed=batch)
    fused, kernels, reference, caches = run_three_ways(*case)
    slot_ids = case[5][0]
    live = slot_ids >= 0
    close(fused[live], reference[live], dtype)
    close(fused[live], kernels[live], dtype)
    for which in (0, 1):  # k, then v: every row the unfused kernels wrote, the fused kernel wrote too
        written, expected = caches["fused"][which], caches["kernels"][which]
        assert torch.equal(written.isnan(), expected.isnan())
        if norm:
            close(written.nan_to_num(), expected.nan_to_num(), dtype)
        else:
            assert torch.equal(written.nan_to_num(), expected.nan_to_num())


def test_declines_what_the_tensor_core_kernel_does_not_serve(monkeypatch):
    q, k, v, k_cache, _, _, cos, _, _ = make_case(3, torch.bfloat16)
    assert ops.rope_decode_takes(q, k, v, k_cache, cos)
    assert not ops.rope_decode_takes(q.float(), k.float(), v.float(), k_cache.float(), cos)
    assert not ops.rope_decode_takes(q.contiguous()[:, :, :96], k, v, k_cache, cos)
    monkeypatch.setenv("VOXCPM_DECODE_ATTENTION_MMA", "0")
    assert not ops.rope_decode_takes(q, k, v, k_cache, cos)
    monkeypatch.setenv("VOXCPM_DECODE_ATTENTION_MMA", "1")
    monkeypatch.setenv("VOXCPM_DECODE_ROPE", "0")
    assert not ops.rope_decode_takes(q, k, v, k_cache, cos)


def test_replays_inside_a_cuda_graph():
    q, k, v, k_cache, v_cache, (slot_ids, positions, lengths), cos, sin, _ = make_case(3, torch.bfloat16, seed=5)
    start_k, start_v = k_cache.clone(), v_cache.clone()
    eager = ops.rope_decode_attention(q, k, v, k_cache, v_cache, positions, slot_ids, lengths, cos, sin)
    eager_k = k_cache.clone()
    k_cache.copy_(start_k)
    v_cache.copy_(start_v)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.stream(stream), torch.cuda.graph(graph, stream=stream):
        out = ops.rope_decode_attention(q, k, v, k_cache, v_cache, positions, slot_ids, lengths, cos, sin)
    torch.cuda.current_stream().wait_stream(stream)
    k_cache.copy_(start_k)
    v_cache.copy_(start_v)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)
    assert torch.equal(k_cache.nan_to_num(), eager_k.nan_to_num())


def test_lm_decode_takes_it_and_matches_the_unfused_decode(monkeypatch):
    from tests.gpu.test_graph_runner import engine, requests, run_to_completion, slim_voxcpm2

    model = slim_voxcpm2(torch.bfloat16)
    calls = []
    real = ops.rope_decode_attention
    monkeypatch.setattr(ops, "rope_decode_attention", lambda *args: calls.append(1) or real(*args))
    fused = run_to_completion(engine(model, 4), requests(model, 3))
    assert calls
    monkeypatch.setenv("VOXCPM_DECODE_ROPE", "0")
    calls.clear()
    unfused = run_to_completion(engine(model, 4), requests(model, 3))
    assert not calls
    for name in unfused:
        assert fused[name].shape == unfused[name].shape
        diff = float(np.abs(fused[name] - unfused[name]).max())
        print(f"{name}: max |fused - unfused| over its patches {diff:.3g}")
        assert diff < 0.1
