"""The engine that launches step n+1 before booking step n (launch_ahead, opt-in with VOXCPM_LAUNCH_AHEAD=1) gives
every stream what the one-step-at-a-time engine gives, drops the extra step of a stream whose stop
head fired, never launches past a budget, and leaves no slot or step behind."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.cpu.engine_harness import run_to_completion
from tests.cpu.test_engine_batching import BATCH_TOLERANCE, mixed_requests, tiny_model
from voxcpm_triton.engine.engine import Engine
from voxcpm_triton.engine.runner import ModelRunner


@pytest.fixture(scope="module")
def model():
    return tiny_model("voxcpm2", seed=2)  # its stop head fires within a few steps for most streams


def stopping_requests(model, count: int):
    """mixed_requests that may stop from their first step; half of them capped at 6 patches."""
    requests = mixed_requests(model, count)
    for i, request in enumerate(requests):
        request.min_len, request.max_len = 0, (40, 6)[i % 2]
    return requests


def engine_for(model, launch_ahead: bool, slots: int = 3, max_context: int | None = None, **fixed) -> Engine:
    context = max_context or model.config.max_length
    built = Engine(model, max_slots=slots, max_context=context, device="cpu", window_patches=4,
                   launch_ahead=launch_ahead)
    if fixed:
        built.runner = ModelRunner(model, slots, context, torch.device("cpu"), fixed_shape=True, **fixed)
    return built


def assert_same_streams(ahead: dict[str, np.ndarray], stepwise: dict[str, np.ndarray]) -> None:
    assert ahead.keys() == stepwise.keys()
    for rid, patches in stepwise.items():
        assert ahead[rid].shape == patches.shape, rid
        assert np.abs(ahead[rid] - patches).max() <= BATCH_TOLERANCE, rid


@pytest.mark.parametrize("fixed", [{}, {"kernel_attention": True, "custom_ops": True}], ids=["reference", "fixed"])
def test_launch_ahead_changes_no_stream(model, fixed):
    """Eight mixed requests through three slots: streams end by stop head and by max_len, and
    queued ones take over slots whose last stream ran a dropped extra step."""
    stepwise = run_to_completion(engine_for(model, False, **fixed), stopping_requests(model, 8))
    caps = [r.max_len for r in stopping_requests(model, 8)]
    assert any(len(patches) < cap for patches, cap in zip(stepwise.values(), caps))  # a stop head fired
    ahead_engine = engine_for(model, True, **fixed)
    ahead = run_to_completion(ahead_engine, stopping_requests(model, 8))
    assert_same_streams(ahead, stepwise)
    while ahead_engine.has_work:  # the dropped step of the last streams to stop, if any
        assert ahead_engine.step() == []
    assert ahead_engine.scheduler.slots.free == 3


def test_no_step_launched_past_the_kv_room(model):
    """Streams whose budget is the KV room left: the step after the last one would write past
    max_context; the engine never launches it."""
    requests = mixed_requests(model, 4)
    for request in requests:
        request.min_len, request.max_len = 10_000, None
    context = max(r.prompt_length for r in requests) + 3
    engine = engine_for(model, True, slots=4, max_context=context)
    patches = run_to_completion(engine, requests)
    for request in requests:
        assert patches[request.request_id].shape[0] == context - request.prompt_length
    assert not engine.has_work


def test_first_outputs_come_one_call_later_and_cancel_mid_flight(model):
    engine = engine_for(model, True, slots=2)
    requests = mixed_requests(model, 2)
    for request in requests:
        request.min_len, request.max_len = 30, 30
        engine.submit(request)
    assert engine.step() == []  # the first step is in flight
    assert engine.has_work
    assert {o.request_id for o in engine.step()} == {"s0", "s1"}
    assert engine.cancel("s0")
    outputs = engine.step()  # ends s0; its row of the step in flight is dropped
    assert [(o.request_id, o.error) for o in outputs] == [("s0", "cancelled"), ("s1", None)]
    assert [o.request_id for o in engine.step()] == ["s1"]
    assert engine.scheduler.slots.free == 1
    engine.cancel("s1")
    while engine.has_work:
        engine.step()
    assert engine.scheduler.slots.free == 2


def test_unread_step_survives_two_launches(model):
    """A step left unread when two more are launched is read out before its buffers are reused."""
    def runner_and_streams():
        engine = engine_for(model, False, slots=2, kernel_attention=True, custom_ops=True)
        for request in mixed_requests(model, 2):
            request.min_len, request.max_len = 30, 30
            engine.submit(request)
        batch, _ = engine.scheduler.schedule()
        engine.runner.prefill(batch.admitted)
        return engine.runner, batch.running

    runner, streams = runner_and_streams()
    expected = [runner.decode(streams) for _ in range(3)]
    runner, streams = runner_and_streams()
    pending = [runner.launch(streams) for _ in range(3)]
    for (patches, stop), step in zip(expected, pending):
        got_patches, got_stop = step.result()
        np.testing.assert_array_equal(got_patches, patches)
        np.testing.assert_array_equal(got_stop, stop)
    assert all(s.launched == 3 for s in streams)
