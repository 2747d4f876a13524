"""Scheduler.max_prefill_rows: a burst of arrivals is admitted a few prompts per step, in FIFO
order, and the rest wait in the queue; without the limit every free slot is filled at once."""

from __future__ import annotations

import pytest
import torch

from voxcpm_triton.engine.request import GenerationRequest
from voxcpm_triton.engine.scheduler import Scheduler


def _request(index: int) -> GenerationRequest:
    length = 5
    return GenerationRequest(
        request_id=f"r{index}", tokens=torch.zeros(length, dtype=torch.int64),
        feats=torch.zeros(length, 2, 4), text_mask=torch.ones(length, dtype=torch.int32),
        audio_mask=torch.zeros(length, dtype=torch.int32), context_patches=torch.zeros(0, 2, 4),
        max_len=8, seed=index,
    )


def _admit(scheduler: Scheduler) -> list[str]:
    batch, _ = scheduler.schedule()
    return [s.request.request_id for s in batch.admitted]


def test_burst_admitted_in_groups_of_max_prefill_rows() -> None:
    scheduler = Scheduler(max_slots=16, max_context=64, window_patches=3, max_prefill_rows=4)
    for index in range(10):
        scheduler.add(_request(index))
    assert _admit(scheduler) == ["r0", "r1", "r2", "r3"]
    assert _admit(scheduler) == ["r4", "r5", "r6", "r7"]
    assert _admit(scheduler) == ["r8", "r9"]
    assert len(scheduler.running) == 10 and not scheduler.queue


def test_without_a_row_limit_all_free_slots_fill() -> None:
    scheduler = Scheduler(max_slots=6, max_context=64, window_patches=3)
    for index in range(10):
        scheduler.add(_request(index))
    assert len(_admit(scheduler)) == 6 and len(scheduler.queue) == 4


def test_bad_max_prefill_rows_is_refused() -> None:
    with pytest.raises(ValueError, match="max_prefill_rows"):
        Scheduler(max_slots=4, max_context=64, window_patches=3, max_prefill_rows=0)
