"""lt_search.walk's greedy search, on a made-up cost landscape: cuBLASLt's calls (decode, build,
check, the capability query) and the GPU timing are replaced, so the walk's rules run on the CPU."""

from __future__ import annotations

from dataclasses import replace

import pytest

from voxcpm_triton.ops import lt_search
from voxcpm_triton.ops.lt_search import Config, Space

START = Config(algo_id=66, tile=1, split_k=1, reduction=0, swizzle=0, custom=0, stages=35, inner=0, cluster=5)
# Three fields away from START, as run 64's best configuration for the LocDiT's down projection was.
BEST = replace(START, tile=4, custom=2, cluster=2)
ROOM = Space(tiles=(1, 2, 3, 4), stages=(35, 36), splits=True, reductions=(2,), swizzle=True, custom_max=3)


def _cost(config: Config) -> float:
    """Each field that matches BEST takes time off; split-k costs extra."""
    return (20.0 - 3.0 * (config.tile == BEST.tile) - 2.0 * (config.custom == BEST.custom)
            - 1.0 * (config.cluster == BEST.cluster) + (config.split_k > 1) + 0.1 * (config.stages != 35))


def _valid(config: Config) -> bool:
    return config.cluster in (0, 2, 3, 5) and config.tile != 3


@pytest.fixture(autouse=True)
def fake_cublaslt(monkeypatch):
    monkeypatch.setattr(lt_search, "decode", lambda algo: algo)
    monkeypatch.setattr(lt_search, "build", lambda config, dtype, device: config)
    monkeypatch.setattr(lt_search, "check", lambda plan, algo, device: _valid(algo))
    monkeypatch.setattr(lt_search, "space", lambda algo_id, dtype, device: ROOM)
    monkeypatch.setattr(lt_search, "time_batch", lambda calls: [call() for call in calls])


def _walk(starts, seconds=0.5):
    return lt_search.walk(None, starts, lambda config: (lambda: _cost(config)), None, None, seconds)


def test_the_walk_reaches_a_configuration_three_fields_away():
    found = _walk([START])
    assert found[0] == BEST
    assert len(found) == lt_search.FINALISTS


def test_finalists_are_valid_distinct_and_fastest_first():
    found = _walk([START, replace(START, tile=2)])
    assert all(_valid(config) for config in found)
    assert len(set(found)) == len(found)
    costs = [_cost(config) for config in found]
    assert costs == sorted(costs)


def test_each_fields_variants_differ_in_that_field_alone_and_never_repeat():
    out = []
    for field in lt_search.FIELD_ORDER:
        allowed = {field, "reduction"} if field == "split_k" else {field}  # split-k comes with its reduction
        for config in lt_search.variants(START, ROOM, field):
            changed = {name for name in Config.__dataclass_fields__ if getattr(config, name) != getattr(START, name)}
            assert changed and changed <= allowed, (field, changed)
            out.append(config)
    assert START not in out and len(set(out)) == len(out)
    assert replace(START, split_k=4, reduction=2) in out
    assert replace(START, tile=4) in out and replace(START, cluster=2) in out


def test_an_exhausted_budget_returns_no_finalists():
    assert _walk([START], seconds=0.0) == []


def test_budget_skips_few_rows_and_stops_when_the_process_total_is_spent(monkeypatch):
    monkeypatch.setenv("VOXCPM_LT_SEARCH_S", "0.25")
    monkeypatch.delenv("VOXCPM_LT_SEARCH_TOTAL_S", raising=False)
    monkeypatch.setattr(lt_search, "_spent_s", 0.0)
    assert lt_search.budget_s(lt_search.MIN_ROWS - 1) == 0.0
    assert lt_search.budget_s(1408) == 0.25
    monkeypatch.setattr(lt_search, "_spent_s", lt_search.DEFAULT_TOTAL_BUDGET_S - 0.1)
    assert lt_search.budget_s(1408) == pytest.approx(0.1)
    assert lt_search.requested_s(1408) == 0.25  # what was asked, whatever is left
    monkeypatch.setattr(lt_search, "_spent_s", lt_search.DEFAULT_TOTAL_BUDGET_S)
    assert lt_search.budget_s(1408) == 0.0
    monkeypatch.setenv("VOXCPM_LT_SEARCH_TOTAL_S", str(lt_search.DEFAULT_TOTAL_BUDGET_S + 10))
    assert lt_search.budget_s(1408) == 0.25


def test_configurations_cublaslt_refuses_to_run_are_left_out():
    # AlgoCheck passes cluster id 2, yet every call with it raises: the walk must carry on without.
    def run(config: Config):
        def call():
            if config.cluster == 2:
                raise lt_search.lt_gemm.LtError("cublasLtMatmul returned cuBLAS status 15")
            return _cost(config)
        return call

    found = lt_search.walk(None, [START], run, None, None, 0.5)
    assert found and all(config.cluster != 2 for config in found)
    assert found[0] == replace(BEST, cluster=0)  # the fastest that runs; ties go to the lowest fields


def test_a_tile_refused_with_the_current_cluster_is_timed_with_the_others(monkeypatch):
    # As run 64's down projection: the fastest tile runs only with a cluster shape that is slower
    # (here: refused) for the starting tile, so neither field's move alone can reach it.
    monkeypatch.setattr(lt_search, "check", lambda plan, algo, device: (algo.tile == 4) == (algo.cluster == 2))
    found = _walk([START])
    assert found[0] == BEST
    assert set(lt_search.reclustered(START)) == {replace(START, cluster=c) for c in lt_search._CLUSTER_IDS} - {START}
