"""lt_search on the GPU: configurations decode and rebuild to the same algorithm, the walk's
finalists compute F.linear's product (with a bias, and added into an output), a zero budget
leaves lt_gemm with the heuristic's list alone, and a later process reuses a walk's finalists from
the lt_cache file."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F

from voxcpm_triton.ops import lt_cache, lt_gemm, lt_search

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

WALK_S = 0.3


def _operands(rows: int, k: int, n: int, bias: bool):
    generator = torch.Generator(device="cuda").manual_seed(rows + 3 * k + n)
    x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16, generator=generator)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=generator) / k ** 0.5
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=generator) if bias else None
    return x, w, b


def _assert_close(out: torch.Tensor, expected: torch.Tensor) -> None:
    # One fp32 accumulation rounded to bf16 each; split-k and tile orders differ: ~2 ulp.
    torch.testing.assert_close(out.float(), expected.float(), rtol=1.6e-2, atol=1.6e-2)


def test_configurations_rebuild_to_the_same_algorithm():
    x, w, _ = _operands(1408, 4096, 1024, False)
    plan, algos = lt_gemm.candidates(x, w, None)
    for algo in algos:
        config = lt_search.decode(algo)
        rebuilt = lt_search.build(config, x.dtype, x.device)
        assert rebuilt is not None and lt_search.decode(rebuilt) == config
        assert lt_search.check(plan, rebuilt, x.device)


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(1408, 4096, 1024), (64, 6144, 2048)])
def test_walk_finalists_match_f_linear(shape, bias):
    x, w, b = _operands(*shape, bias)
    plan, algos = lt_gemm.candidates(x, w, b)
    out = x.new_empty(x.shape[0], w.shape[0])
    found = lt_search.walk(plan, algos, lambda algo: functools.partial(lt_gemm.run_algo, plan, algo, x, w, b, out),
                           x.dtype, x.device, WALK_S)
    assert 0 < len(found) <= lt_search.FINALISTS
    expected = F.linear(x, w, b)
    for algo in found:
        _assert_close(lt_gemm.run_algo(plan, algo, x, w, b), expected)


def test_walk_finalists_add_into_the_output():
    x, w, _ = _operands(1408, 2048, 1024, False)
    plan, algos = lt_gemm.candidates(x, w, None)
    scratch = torch.zeros(x.shape[0], w.shape[0], device="cuda", dtype=x.dtype)
    found = lt_search.walk(plan, algos,
                           lambda algo: functools.partial(lt_gemm._accumulate, plan, algo, x, w, scratch, 0.5),
                           x.dtype, x.device, WALK_S)
    residual = torch.randn_like(scratch)
    for algo in found:
        out = residual.clone()
        lt_gemm._accumulate(plan, algo, x, w, out, 0.5)
        _assert_close(out, residual.float() + 0.5 * F.linear(x, w).float())


def test_a_zero_budget_keeps_the_heuristic_list(monkeypatch):
    x, w, _ = _operands(1408, 1024, 2560, False)
    plan, algos = lt_gemm.candidates(x, w, None)
    monkeypatch.setenv("VOXCPM_LT_SEARCH_S", "0")
    assert lt_gemm._searched(plan, algos, lambda algo: None, x, lt_gemm._key(x, w, None)) is algos


def test_a_cached_walk_serves_the_next_tuning_of_the_shape(tmp_path, monkeypatch):
    x, w, _ = _operands(1408, 4096, 1024, False)
    monkeypatch.setenv("VOXCPM_LT_CACHE", str(tmp_path / "lt.json"))
    monkeypatch.setenv("VOXCPM_LT_CACHE_SEED", "")  # the shipped seed may hold the shape already
    monkeypatch.setenv("VOXCPM_LT_SEARCH_S", str(WALK_S))
    monkeypatch.setattr(lt_gemm, "_plans", {})
    monkeypatch.setattr(lt_search, "_spent_s", 0.0)
    with lt_gemm.tuning():
        lt_gemm.linear(x, w)
    entry = lt_cache.lookup(x.device, lt_gemm._key(x, w, None))
    assert entry is not None and entry.seconds == WALK_S and entry.configs

    def no_walk(*args, **kwargs):
        raise AssertionError("the cached finalists should have been used")

    monkeypatch.setattr(lt_search, "walk", no_walk)
    monkeypatch.setattr(lt_gemm, "_plans", {})  # as a new process would start
    with lt_gemm.tuning():
        out = lt_gemm.linear(x, w)
    _assert_close(out, F.linear(x, w))
