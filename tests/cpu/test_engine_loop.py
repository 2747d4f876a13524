"""voxcpm_triton.serving.engine_loop: the ar_decoder's engine thread routes each stream's windows to
its sink unchanged, ends every stream exactly once, frees the slot of a cancelled stream and never
hangs a stream on a bad request or on shutdown."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import torch

from voxcpm_triton.checkpoint.loader import load_checkpoint
from voxcpm_triton.checkpoint.make import make_checkpoint
from voxcpm_triton.engine.engine import Engine
from voxcpm_triton.engine.prefill import build_prefill
from voxcpm_triton.engine.request import GenerationRequest
from voxcpm_triton.serving.engine_loop import EngineLoop
from voxcpm_triton.serving.step_meter import StepMeter, StepTotals

WINDOW = 3


class ListSink:
    """Collects what the loop sends; `cancel_after` windows later it reports a cancelled client."""

    def __init__(self, cancel_after: int | None = None) -> None:
        self.windows: list[np.ndarray] = []
        self.new_patches: list[int] = []
        self.endings: list[str] = []
        self.cancel_after = cancel_after
        self.ended = threading.Event()

    def send_window(self, window, new_patches):
        self.windows.append(window.copy())
        self.new_patches.append(new_patches)

    def finish(self):
        self.endings.append("finish")
        self.ended.set()

    def fail(self, message):
        self.endings.append(f"fail: {message}")
        self.ended.set()

    def is_cancelled(self):
        return self.cancel_after is not None and len(self.windows) >= self.cancel_after


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    folder = make_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny", "voxcpm2", size="tiny")
    return load_checkpoint(folder).model


def _engine(model) -> Engine:
    return Engine(model, max_slots=4, max_context=512, device="cpu", window_patches=WINDOW)


def _request(model, request_id: str, tokens, length: int, seed: int) -> GenerationRequest:
    seq = build_prefill(tokens, None, None, model.config)
    return GenerationRequest(request_id, seq.tokens, seq.feats, seq.text_mask, seq.audio_mask,
                             seq.context_patches, min_len=length, max_len=length, seed=seed)


def _direct(model, requests) -> dict[str, list[np.ndarray]]:
    engine = _engine(model)
    for request in requests:
        engine.submit(request)
    windows: dict[str, list[np.ndarray]] = {r.request_id: [] for r in requests}
    while engine.has_work:
        for output in engine.step():
            if len(output.window):
                windows[output.request_id].append(output.window)
    return windows


class SlowSink(ListSink):
    """Delivery slower than the engine's steps: the engine thread must wait, not drop or reorder."""

    def send_window(self, window, new_patches):
        time.sleep(0.02)
        super().send_window(window, new_patches)


@pytest.mark.parametrize("sink_type", [ListSink, SlowSink])
def test_windows_reach_their_sinks_unchanged(model, sink_type):
    lengths = {"a": 3, "b": 6}
    make = lambda: [_request(model, rid, [5 + i, 9, 12], n, seed=i) for i, (rid, n) in enumerate(lengths.items())]
    expected = _direct(model, make())
    slots: list[int] = []
    loop = EngineLoop(_engine(model), on_live_slots=slots.append)
    sinks = {rid: sink_type() for rid in lengths}
    for request in make():
        loop.submit(request, sinks[request.request_id])
    loop.start()  # after the submissions: the first step admits all, as in _direct (same batches, same bits)
    for sink in sinks.values():
        assert sink.ended.wait(60)
    loop.stop()
    for rid, n in lengths.items():
        assert sinks[rid].endings == ["finish"]
        assert len(sinks[rid].windows) == n
        for got, want in zip(sinks[rid].windows, expected[rid]):
            np.testing.assert_array_equal(got, want)
    assert slots[-1] == 0 and max(slots) == 2


def test_chunked_windows_carry_every_patch_in_order(model):
    lengths = {"a": 1, "b": 4, "c": 9}
    make = lambda: [_request(model, rid, [5 + i, 9, 12], n, seed=i) for i, (rid, n) in enumerate(lengths.items())]
    expected = _direct(model, make())
    loop = EngineLoop(_engine(model), chunk_patches=4)
    sinks = {rid: ListSink() for rid in lengths}
    for request in make():
        loop.submit(request, sinks[request.request_id])
    loop.start()
    for sink in sinks.values():
        assert sink.ended.wait(60)
    loop.stop()
    for rid, n in lengths.items():
        sink = sinks[rid]
        assert sink.endings == ["finish"]
        assert sink.new_patches == {1: [1], 4: [1, 2, 1], 9: [1, 2, 4, 2]}[n]
        patches = [window[-1] for window in expected[rid]]
        got = [patch for window, new in zip(sink.windows, sink.new_patches) for patch in window[-new:]]
        np.testing.assert_array_equal(np.stack(got), np.stack(patches))
        # Each window also holds the left context the decoder reads: WINDOW - 1 patches once there are.
        produced = 0
        for window, new in zip(sink.windows, sink.new_patches):
            produced += new
            assert window.shape[0] == min(new + WINDOW - 1, produced)


class StalledSink(ListSink):
    def send_window(self, window, new_patches):
        time.sleep(0.1)
        super().send_window(window, new_patches)


def test_meter_counts_every_step_and_the_waits_for_delivery(model):
    lengths = {"a": 3, "b": 6}
    published: list[StepTotals] = []
    loop = EngineLoop(_engine(model), delivery_threads=1, meter=StepMeter(published.append, period_s=3600))
    sinks = {rid: StalledSink() for rid in lengths}
    for i, (rid, n) in enumerate(lengths.items()):
        loop.submit(_request(model, rid, [5 + i, 9, 12], n, seed=i), sinks[rid])
    loop.start()
    for sink in sinks.values():
        assert sink.ended.wait(60)
    deadline = time.monotonic() + 10
    while not published:  # flushed once the engine has no work left
        assert time.monotonic() < deadline
        time.sleep(0.01)
    loop.stop()
    assert len(published) == 1
    totals = published[0]
    assert (totals.steps, totals.stream_steps) == (6, 9)
    assert totals.step_s > 0 and totals.gate_s < 0.01  # no back-pressure gate here
    # 9 windows at 0.1 s each through one delivery thread that runs at most two steps behind.
    assert totals.handoff_s > 0.2


def test_cancelled_stream_frees_its_slot(model):
    engine = _engine(model)
    # One cancellation check per step among four streams: each sink is asked every fourth step.
    loop = EngineLoop(engine, cancel_checks_per_step=1)
    loop.start()
    others = [ListSink(cancel_after=12) for _ in range(3)]
    sink = ListSink(cancel_after=2)
    for index, other in enumerate(others):
        loop.submit(_request(model, f"other{index}", [7, 8], 400, seed=index), other)
    loop.submit(_request(model, "long", [7, 8], 400, seed=3), sink)
    assert sink.ended.wait(60)
    assert sink.endings == ["finish"]
    assert 2 <= len(sink.windows) <= 2 + 4
    for other in others:
        assert other.ended.wait(60) and other.endings == ["finish"]
    deadline = time.monotonic() + 10
    while engine.has_work and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.live_slots == 0 and not engine.has_work
    assert loop.live_streams == 0
    loop.stop()


def test_bad_request_fails_its_stream_only(model):
    loop = EngineLoop(_engine(model))
    loop.start()
    bad = _request(model, "bad", [5], 3, seed=0)
    bad.tokens = torch.tensor([10**6, 1])
    bad_sink, good_sink = ListSink(), ListSink()
    loop.submit(bad, bad_sink)
    loop.submit(_request(model, "good", [5, 6], 2, seed=0), good_sink)
    assert bad_sink.ended.wait(10) and good_sink.ended.wait(60)
    assert bad_sink.endings[0].startswith("fail: tokens must lie in")
    assert good_sink.endings == ["finish"]
    # A request the engine cannot even compare (a string for an int) fails too, and stays no stream.
    odd = _request(model, "odd", [5], 3, seed=0)
    odd.timesteps = "10"
    odd_sink = ListSink()
    loop.submit(odd, odd_sink)
    assert odd_sink.ended.wait(10) and odd_sink.endings[0].startswith("fail: TypeError: ")
    assert loop.stream_ids() == []
    loop.stop()


class BrokenSink(ListSink):
    """A sink whose window sends raise (the response sender broke)."""

    def send_window(self, window, new_patches):
        raise RuntimeError("sender broke")


def test_a_failing_delivery_ends_its_stream_and_the_loop_goes_on(model):
    engine = _engine(model)
    asked = []

    def flaky_cancel_source(ids):
        asked.append(ids)
        if len(asked) == 1:
            raise OSError("board gone")
        return []

    # One delivery thread, so every stream and cancellation check depends on it surviving.
    loop = EngineLoop(engine, cancel_source=flaky_cancel_source, delivery_threads=1)
    loop.start()
    broken, broken_last, good = BrokenSink(), BrokenSink(), ListSink()
    loop.submit(_request(model, "broken", [5, 6], 30, seed=0), broken)
    loop.submit(_request(model, "broken-last", [5, 9], 1, seed=3), broken_last)  # its one window is its last
    loop.submit(_request(model, "good", [5, 7], 8, seed=1), good)
    assert broken.ended.wait(60) and good.ended.wait(60) and broken_last.ended.wait(60)
    assert broken.endings == ["fail: delivery failed: RuntimeError: sender broke"]
    assert broken_last.endings == ["fail: delivery failed: RuntimeError: sender broke"]
    assert good.endings == ["finish"] and len(good.windows) == 8
    later = ListSink()
    loop.submit(_request(model, "later", [5, 8], 3, seed=2), later)
    assert later.ended.wait(60) and later.endings == ["finish"]
    deadline = time.monotonic() + 10
    while engine.has_work and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.live_slots == 0 and len(asked) > 1
    loop.stop()


def test_stop_ends_live_streams_with_an_error(model):
    loop = EngineLoop(_engine(model))
    loop.start()
    sink = ListSink()
    loop.submit(_request(model, "endless", [5, 6], 400, seed=1), sink)
    while not sink.windows:
        time.sleep(0.01)
    loop.stop()
    assert sink.endings == ["fail: the model is shutting down"]
    late = ListSink()
    loop.submit(_request(model, "late", [5], 2, seed=1), late)
    assert late.endings == ["fail: the model is shutting down"]


def test_a_cancel_asked_for_survives_a_failing_cancel_source(model):
    engine = _engine(model)
    failing = threading.Event()

    def source(ids):
        if failing.is_set():
            failing.clear()
            raise OSError("board gone")
        return []

    loop = EngineLoop(engine, cancel_source=source, delivery_threads=1)
    loop.start()
    sink = ListSink()
    loop.submit(_request(model, "long", [7, 8], 400, seed=1), sink)
    while not sink.windows:
        time.sleep(0.01)
    failing.set()  # the next check's source raises, after cancel() has asked
    loop.cancel(["long"])
    assert sink.ended.wait(30) and sink.endings == ["finish"] and len(sink.windows) < 400
    deadline = time.monotonic() + 10
    while engine.has_work and time.monotonic() < deadline:  # the slot goes at the next step
        time.sleep(0.01)
    assert engine.live_slots == 0
    loop.stop()


def test_cancel_by_id_ends_only_the_named_stream(model):
    engine = _engine(model)
    loop = EngineLoop(engine)
    loop.start()
    named, other = ListSink(), ListSink()
    loop.submit(_request(model, "client-a#0", [7, 8], 400, seed=1), named)
    loop.submit(_request(model, "client-b#1", [7, 8], 5, seed=2), other)
    while not named.windows:
        time.sleep(0.01)
    assert sorted(loop.stream_ids()) == ["client-a#0", "client-b#1"]
    loop.cancel(["client-a#0"])
    assert named.ended.wait(10) and other.ended.wait(60)
    assert named.endings == ["finish"] and len(named.windows) < 400
    assert other.endings == ["finish"] and len(other.windows) == 5
    loop.stop()
    assert engine.live_slots == 0


def test_cancel_source_is_asked_every_step(model):
    engine = _engine(model)
    posted = {"client-c#0"}
    loop = EngineLoop(engine, cancel_source=lambda ids: [i for i in ids if i in posted])
    loop.start()
    sink = ListSink()
    loop.submit(_request(model, "client-c#0", [7, 8], 400, seed=1), sink)
    assert sink.ended.wait(30)
    assert sink.endings == ["finish"] and len(sink.windows) <= 1
    loop.stop()


class ThreadRecordingSink(SlowSink):
    """Records which threads used it: a sink must only ever be used by one delivery thread."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: set[int] = set()

    def send_window(self, window, new_patches):
        self.threads.add(threading.get_ident())
        super().send_window(window, new_patches)

    def finish(self):
        self.threads.add(threading.get_ident())
        super().finish()


@pytest.mark.parametrize("delivery_threads", [1, 3])
def test_streams_are_shared_among_delivery_threads_in_order(model, delivery_threads):
    ids = [f"s{i}" for i in range(4)]
    make = lambda: [_request(model, rid, [5 + i, 9, 12], 4 + i, seed=i) for i, rid in enumerate(ids)]
    expected = _direct(model, make())
    loop = EngineLoop(_engine(model), delivery_threads=delivery_threads)
    sinks = {rid: ThreadRecordingSink() for rid in ids}
    for request in make():
        loop.submit(request, sinks[request.request_id])
    loop.start()  # after the submissions, as above
    for sink in sinks.values():
        assert sink.ended.wait(60)
    loop.stop()
    used = set()
    for rid in ids:
        assert sinks[rid].endings == ["finish"] and len(sinks[rid].threads) == 1
        used |= sinks[rid].threads
        assert len(sinks[rid].windows) == len(expected[rid])
        for got, want in zip(sinks[rid].windows, expected[rid]):
            np.testing.assert_array_equal(got, want)
    assert len(used) == delivery_threads  # four streams dealt round-robin reach every thread


def test_delivery_threads_must_be_positive(model):
    with pytest.raises(ValueError, match="delivery_threads"):
        EngineLoop(_engine(model), delivery_threads=0)


def test_after_first_patches_names_each_stream_once_before_the_next_step(model):
    lengths = {"a#0": 3, "b#1": 5}
    calls: list[tuple[list[str], int]] = []
    published: list[StepTotals] = []

    def after_first(ids, live):
        calls.append((list(ids), live))
        time.sleep(0.05)  # the wait counts as back-pressure in the meter

    loop = EngineLoop(_engine(model), after_first_patches=after_first,
                      meter=StepMeter(published.append, period_s=3600))
    sinks = {rid: ListSink() for rid in lengths}
    for i, (rid, n) in enumerate(lengths.items()):
        loop.submit(_request(model, rid, [5 + i, 9, 12], n, seed=i), sinks[rid])
    loop.start()
    for sink in sinks.values():
        assert sink.ended.wait(60)
    late = ListSink()
    loop.submit(_request(model, "c#2", [6, 9], 2, seed=3), late)  # admitted after the others ended
    assert late.ended.wait(60)
    loop.stop()
    named = [rid for ids, _ in calls for rid in ids]
    assert sorted(named) == ["a#0", "b#1", "c#2"]  # each stream once, whatever the step it began in
    assert calls[-1] == (["c#2"], 1)  # with the live streams at that moment
    # Published whenever the engine runs out of work: after a and b, and after c.
    deadline = time.monotonic() + 10
    while sum(totals.steps for totals in published) < 3 + 2 + (5 - 3):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert sum(totals.gate_s for totals in published) >= 0.05 * len(calls)
