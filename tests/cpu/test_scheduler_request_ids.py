"""A request id may be used again once its stream has ended: what reached the scheduler for the old
stream (a failed launch-ahead step, a cancel that came after the step was scheduled) must not end
or cancel the new one, nor release its slot."""

from __future__ import annotations

import numpy as np
import torch

from voxcpm_triton.engine.request import GenerationRequest
from voxcpm_triton.engine.scheduler import Scheduler

PATCH = (2, 4)


def _request(request_id: str, max_len: int = 1) -> GenerationRequest:
    length = 5
    return GenerationRequest(
        request_id=request_id, tokens=torch.zeros(length, dtype=torch.int64), feats=torch.zeros(length, *PATCH),
        text_mask=torch.ones(length, dtype=torch.int32), audio_mask=torch.zeros(length, dtype=torch.int32),
        context_patches=torch.zeros(0, *PATCH), max_len=max_len,
    )


def _book_one_step(scheduler: Scheduler, batch) -> list:
    rows = len(batch.running)
    return scheduler.book(batch, np.zeros((rows, *PATCH), dtype=np.float32), np.zeros(rows, dtype=bool))


def test_failing_an_ended_streams_step_spares_its_successor() -> None:
    scheduler = Scheduler(max_slots=3, max_context=64, window_patches=2)
    scheduler.add(_request("x"))
    old_batch, _ = scheduler.schedule()
    assert [o.finished for o in _book_one_step(scheduler, old_batch)] == [True]  # max_len 1
    scheduler.add(_request("x", max_len=4))
    new_batch, _ = scheduler.schedule()
    new_stream = scheduler.running["x"]

    assert scheduler.fail(old_batch.running, "step failed") == []
    assert scheduler.running["x"] is new_stream and new_batch.running == [new_stream]
    assert scheduler.slots.free == 2  # the new stream keeps its slot


def test_a_cancel_for_a_stream_that_then_finished_does_not_cancel_a_new_one() -> None:
    scheduler = Scheduler(max_slots=2, max_context=64, window_patches=2)
    scheduler.add(_request("x"))
    batch, _ = scheduler.schedule()
    assert scheduler.cancel("x")  # arrives while its last step is in flight
    assert [o.finished for o in _book_one_step(scheduler, batch)] == [True]
    scheduler.add(_request("x", max_len=4))
    batch, ended = scheduler.schedule()
    assert ended == [] and [s.request.request_id for s in batch.admitted] == ["x"]
