"""The flash-attn stand-in used for the Nano-vLLM-VoxCPM baseline against a per-sequence softmax oracle
(float64 on CPU), for the exact call patterns nano makes: fixed-length non-causal, ragged prefill
(plain and over the paged cache) and one-token decode over the paged cache with grouped heads."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import torch

STANDIN = Path(__file__).resolve().parents[2] / "perf" / "baselines" / "flash_attn_standin"


@pytest.fixture(scope="module")
def fa():
    sys.path.insert(0, str(STANDIN))
    try:
        module = importlib.import_module("flash_attn")
        assert module.__version__.endswith("sdpa-standin")
        yield module
    finally:
        sys.path.remove(str(STANDIN))
        sys.modules.pop("flash_attn", None)


def oracle(q, k, v, scale, causal):
    """q [Sq, H, D], k/v [Sk, Hk, D]; bottom-right causal alignment like flash-attn."""
    sq, heads, _ = q.shape
    sk, kv_heads, _ = k.shape
    k = k.repeat_interleave(heads // kv_heads, dim=1)
    v = v.repeat_interleave(heads // kv_heads, dim=1)
    scores = torch.einsum("qhd,khd->hqk", q, k) * scale
    if causal:
        allowed = torch.arange(sk)[None, :] <= (sk - sq + torch.arange(sq))[:, None]
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(scores, dim=-1), v)


def rand(*shape):
    return torch.randn(*shape, dtype=torch.float64)


def test_fixed_length_non_causal(fa):
    q, k, v = rand(3, 9, 4, 8), rand(3, 9, 2, 8), rand(3, 9, 2, 8)
    out = fa.flash_attn_func(q, k, v, softmax_scale=0.3, causal=False)
    assert out.is_contiguous()  # nano .view()s the output
    for b in range(3):
        torch.testing.assert_close(out[b], oracle(q[b], k[b], v[b], 0.3, False))


def test_varlen_prefill_ragged(fa):
    lengths = [5, 1, 7]
    cu = torch.tensor([0, 5, 6, 13], dtype=torch.int32)
    q, k, v = rand(13, 4, 8), rand(13, 2, 8), rand(13, 2, 8)
    out = fa.flash_attn_varlen_func(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=7,
                                    max_seqlen_k=7, softmax_scale=0.25, causal=True)
    assert out.is_contiguous()
    for s, e in zip([0, 5, 6], [5, 6, 13]):
        torch.testing.assert_close(out[s:e], oracle(q[s:e], k[s:e], v[s:e], 0.25, True))
    assert out.shape == q.shape and sum(lengths) == 13


def paged_cache(seq_keys, block_size, blocks=16, seed=0):
    """Scatter each sequence's [L, Hk, D] keys into shuffled pages; returns cache and block table."""
    gen = torch.Generator().manual_seed(seed)
    order = torch.randperm(blocks, generator=gen).tolist()
    cache = rand(blocks, block_size, *seq_keys[0].shape[1:])
    width = max(-(-len(x) // block_size) for x in seq_keys) + 1  # a spare column, padded with -1
    table = torch.full((len(seq_keys), width), -1, dtype=torch.int32)
    for i, keys in enumerate(seq_keys):
        for j in range(-(-len(keys) // block_size)):
            page = order.pop()
            table[i, j] = page
            chunk = keys[j * block_size:(j + 1) * block_size]
            cache[page, :len(chunk)] = chunk
    return cache, table


def test_varlen_prefill_over_paged_cache(fa):
    block_size, lens_k, lens_q = 4, [6, 9], [2, 3]  # prefix-cache hit: only the tails are queried
    keys = [rand(n, 2, 8) for n in lens_k]
    values = [rand(n, 2, 8) for n in lens_k]
    k_cache, table = paged_cache(keys, block_size, seed=1)
    v_cache, _ = paged_cache(values, block_size, seed=1)
    q = rand(sum(lens_q), 4, 8)
    out = fa.flash_attn_varlen_func(q, k_cache, v_cache, cu_seqlens_q=torch.tensor([0, 2, 5]),
                                    cu_seqlens_k=torch.tensor([0, 6, 15]), max_seqlen_q=3, max_seqlen_k=9,
                                    softmax_scale=0.2, causal=True, block_table=table)
    torch.testing.assert_close(out[:2], oracle(q[:2], keys[0], values[0], 0.2, True))
    torch.testing.assert_close(out[2:], oracle(q[2:], keys[1], values[1], 0.2, True))


def test_decode_over_paged_cache(fa):
    block_size, lens = 4, [3, 10, 1]
    keys = [rand(n, 2, 8) for n in lens]
    values = [rand(n, 2, 8) for n in lens]
    k_cache, table = paged_cache(keys, block_size, seed=2)
    v_cache, _ = paged_cache(values, block_size, seed=2)
    q = rand(3, 1, 4, 8)
    out = fa.flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=torch.tensor(lens, dtype=torch.int32),
                                     block_table=table, softmax_scale=0.3, causal=True)
    assert out.shape == q.shape and out.is_contiguous()
    for b in range(3):
        torch.testing.assert_close(out[b], oracle(q[b], keys[b], values[b], 0.3, True))


def test_unsupported_arguments_fail_loudly(fa):
    q = rand(1, 2, 2, 8)
    with pytest.raises(NotImplementedError, match="alibi_slopes"):
        fa.flash_attn_func(q, q, q, alibi_slopes=torch.ones(2))
