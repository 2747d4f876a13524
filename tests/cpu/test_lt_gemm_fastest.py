"""lt_gemm.fastest, the choice both per-shape GEMM tunings (lt_gemm, gate_up_sm90) make: the
fastest candidate that reproduces the baseline's output and beats it by MIN_GAIN. GPU timing is
replaced by each call's declared time, so the selection rules run on the CPU."""

from __future__ import annotations

import pytest
import torch

from voxcpm_triton.ops import lt_gemm

EXPECTED = torch.tensor([1.0, -2.0, 4.0])


def _call(ms: float, output: torch.Tensor = EXPECTED):
    def call():
        return output
    call.ms = ms
    return call


@pytest.fixture(autouse=True)
def declared_times(monkeypatch):
    monkeypatch.setattr(lt_gemm, "time_call", lambda fn: fn.ms)


def test_the_fastest_matching_candidate_wins():
    candidates = [("a", _call(9.0)), ("b", _call(7.0)), ("c", _call(8.0))]
    assert lt_gemm.fastest(EXPECTED, _call(10.0), candidates) == "b"


def test_a_candidate_with_another_output_is_never_chosen():
    wrong = EXPECTED + torch.tensor([0.0, 0.0, 0.2])  # 5% of the largest magnitude
    candidates = [("wrong", _call(1.0, wrong)), ("right", _call(9.0))]
    assert lt_gemm.fastest(EXPECTED, _call(10.0), candidates) == "right"


def test_rounding_sized_differences_still_count_as_the_same_output():
    close = EXPECTED + torch.tensor([0.0, 0.05, 0.0])  # 1.25% of the largest magnitude
    assert lt_gemm.fastest(EXPECTED, _call(10.0), [("close", _call(5.0, close))]) == "close"


def test_less_than_min_gain_keeps_the_baseline():
    just_under = 10.0 * (1 - lt_gemm.MIN_GAIN) + 1e-3
    assert lt_gemm.fastest(EXPECTED, _call(10.0), [("a", _call(just_under))]) is None
    assert lt_gemm.fastest(EXPECTED, _call(10.0), [("a", _call(just_under - 2e-3))]) == "a"


def test_candidates_raising_a_listed_error_are_left_out_others_propagate():
    def failing():
        raise lt_gemm.LtError("not supported for this shape")
    failing.ms = 0.1
    candidates = [("fails", failing), ("works", _call(5.0))]
    assert lt_gemm.fastest(EXPECTED, _call(10.0), candidates, errors=(lt_gemm.LtError,)) == "works"
    with pytest.raises(lt_gemm.LtError):
        lt_gemm.fastest(EXPECTED, _call(10.0), candidates)


def test_no_candidate_means_no_choice():
    assert lt_gemm.fastest(EXPECTED, _call(10.0), []) is None
