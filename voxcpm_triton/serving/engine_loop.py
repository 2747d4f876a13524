"""The serving loop around the continuous-batching Engine, run by threads the ar_decoder model owns:
the engine thread steps the engine while it has work; delivery threads route each step's outputs to
the streams' sinks and handle cancellation. Sending a response is a round trip to the Triton server
process (~0.1-0.4 ms, the GIL released meanwhile), so sending step N's windows overlaps step N+1
instead of adding to it, and the streams are shared among several delivery threads: at 256 streams
one thread would spend a whole ~50 ms step sending. Each stream stays on the delivery thread it was
given at submit (its windows arrive in order); at most two steps wait for any delivery thread.
That thread also groups the stream's patches into vocoder windows (audio.chunks.PatchChunker): one
patch in the first window, then 2, 4, ... up to `chunk_patches`, each window with its left context.

Sinks hide Triton: the ar_decoder wraps a response sender in one; tests can use a list. Only its
delivery thread uses a registered sink, and a stream ends exactly once, through finish() (last
patch, or cancelled) or fail(message)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Callable, Iterable, Protocol

import numpy as np

from voxcpm_triton.audio.chunks import PatchChunker
from voxcpm_triton.engine.request import GenerationRequest
from voxcpm_triton.serving.step_meter import StepMeter

log = logging.getLogger(__name__)


class StreamSink(Protocol):
    def send_window(self, window: np.ndarray, new_patches: int) -> None: ...
    def finish(self) -> None: ...
    def fail(self, message: str) -> None: ...
    def is_cancelled(self) -> bool: ...


class EngineLoop:
    """Steps `engine` in background threads; `submit`, `cancel` and `stop` are thread-safe.

    Asking a sink whether its client went away is a round trip to the Triton server process, too
    dear to do for every stream on every step: after each step at most `cancel_checks_per_step`
    sinks are asked, in turn, so with S streams each is asked every S / cancel_checks_per_step
    steps (per delivery thread). `on_live_slots` is called when the engine's slot count changes.
    `cancel_source`, when given, is called once per step and delivery thread with that thread's
    live stream ids and returns those to end (the ar_decoder's view of cancellations posted by its
    other instances). `before_step`, when given, is called with the number of live streams before
    each step and may block (back-pressure). `after_first_patches`, when given, is called before
    the next step with the ids of the streams whose first patch the last step made and the number
    of live streams, and may block (first_window_gate.FirstWindowGate). `delivery_threads` share
    the streams' sinks. A window sent carries at most `chunk_patches` new patches (1: each patch in
    its own window). `meter`, when given, records each step's times (the engine thread's share of
    served time); both waits before a step count as back-pressure there."""

    def __init__(
        self,
        engine,
        on_live_slots: Callable[[int], None] = lambda count: None,
        cancel_checks_per_step: int = 8,
        cancel_source: Callable[[list[str]], list[str]] | None = None,
        before_step: Callable[[int], None] | None = None,
        after_first_patches: Callable[[list[str], int], None] | None = None,
        delivery_threads: int = 4,
        chunk_patches: int = 1,
        meter: StepMeter | None = None,
    ) -> None:
        if cancel_checks_per_step < 1:
            raise ValueError(f"cancel_checks_per_step={cancel_checks_per_step}; must be >= 1")
        if delivery_threads < 1:
            raise ValueError(f"delivery_threads={delivery_threads}; must be >= 1")
        if chunk_patches < 1:
            raise ValueError(f"chunk_patches={chunk_patches}; must be >= 1")
        self._engine = engine
        self._on_live_slots = on_live_slots
        self._cancel_checks = cancel_checks_per_step
        self._cancel_source = cancel_source
        self._before_step = before_step
        self._after_first_patches = after_first_patches
        self._first_patches: list[str] = []  # streams whose first patch the last step made
        self._meter = meter
        self._sinks: dict[str, StreamSink] = {}
        self._chunk_patches = chunk_patches
        self._chunkers: dict[str, PatchChunker] = {}  # used by the stream's delivery thread only
        self._owner: dict[str, int] = {}  # request id -> the delivery thread that uses its sink
        self._submitted = 0
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._stopping = False
        self._next_check = [0] * delivery_threads  # round-robin position among each thread's sinks
        self._to_cancel: set[str] = set()  # asked for by cancel(); done on the delivery threads
        self._reported_slots = 0
        # Per delivery thread, its share of each step's outputs; a failure message (str) fails
        # every stream; None ends the thread.
        self._outboxes: list[queue.Queue] = [queue.Queue(maxsize=2) for _ in range(delivery_threads)]
        self._thread = threading.Thread(target=self._run, name="voxcpm-engine", daemon=True)
        self._delivery = [threading.Thread(target=self._deliver_loop, args=(worker,), name=f"voxcpm-delivery-{worker}",
                                           daemon=True) for worker in range(delivery_threads)]

    def start(self) -> None:
        for thread in self._delivery:
            thread.start()
        self._thread.start()

    @property
    def live_streams(self) -> int:
        with self._lock:
            return len(self._sinks)

    def submit(self, request: GenerationRequest, sink: StreamSink) -> None:
        with self._lock:
            if self._stopping:
                sink.fail("the model is shutting down")
                return
            if request.request_id in self._sinks:
                sink.fail(f"request id {request.request_id!r} is already streaming")
                return
            # The sink is registered before the engine can produce anything for it.
            self._sinks[request.request_id] = sink
            self._chunkers[request.request_id] = PatchChunker(self._engine.window_patches, self._chunk_patches)
            self._owner[request.request_id] = self._submitted % len(self._outboxes)
            self._submitted += 1
            try:
                self._engine.submit(request)
            except Exception as exc:  # whatever it is, the stream must not stay registered
                self._forget(request.request_id)
                sink.fail(str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}")
                return
            self._wake.notify()

    def stream_ids(self) -> list[str]:
        with self._lock:
            return list(self._sinks)

    def cancel(self, request_ids: Iterable[str]) -> None:
        """End these streams after the next step (finish() on their sinks, slots freed). The
        delivery thread does it, so a sink is never used by two threads."""
        with self._lock:
            self._to_cancel.update(request_ids)
            self._wake.notify()

    def stop(self, timeout_s: float = 30.0) -> None:
        """End every live stream with an error and join the threads."""
        with self._lock:
            self._stopping = True
            self._wake.notify()
        self._thread.join(timeout_s)
        for outbox in self._outboxes:
            outbox.put(None)  # after the engine thread's last outputs
        for thread in self._delivery:
            thread.join(timeout_s)
        with self._lock:
            leftover = list(self._sinks.items())
            self._sinks.clear()
            self._owner.clear()
        for request_id, sink in leftover:
            self._end_with_error(request_id, sink, "the model is shutting down")

    def _run(self) -> None:
        while True:
            with self._lock:
                idle = not self._engine.has_work and not self._stopping
            if idle and self._meter is not None:
                self._meter.flush()  # outside the lock: publishing is a round trip
            with self._lock:
                # has_work also covers streams cancelled since the last step: their slots are
                # released by the next step.
                while not self._engine.has_work and not self._stopping:
                    self._wake.wait()
                if self._stopping:
                    return
            started = time.perf_counter()
            if self._first_patches:
                if self._after_first_patches is not None:
                    self._after_first_patches(self._first_patches, self.live_streams)
                self._first_patches = []
            if self._before_step is not None:
                self._before_step(self.live_streams)
            gated = time.perf_counter()
            try:
                outputs = self._engine.step()
            except Exception as exc:  # a failed step must not leave streams hanging
                log.exception("engine step failed")
                for outbox in self._outboxes:
                    outbox.put(f"engine step failed: {type(exc).__name__}: {exc}")
                continue
            stepped = time.perf_counter()
            shares: list[list] = [[] for _ in self._outboxes]
            with self._lock:
                for output in outputs:  # a stream no longer registered was cancelled: dropped
                    owner = self._owner.get(output.request_id)
                    if owner is not None:
                        shares[owner].append(output)
                        if output.patch_index == 0:
                            self._first_patches.append(output.request_id)
            for outbox, share in zip(self._outboxes, shares):
                outbox.put(share)  # waits while that thread still delivers two steps
            if self._meter is not None:
                self._meter.record(len(outputs), gated - started, stepped - gated, time.perf_counter() - stepped)
            self._report_slots()

    def _deliver_loop(self, worker: int) -> None:
        # Nothing may end this thread but stop(): the engine thread waits on its outbox, so a dead
        # delivery thread would hang every stream of the instance.
        while True:
            item = self._outboxes[worker].get()
            if item is None:
                return
            if isinstance(item, str):
                self._fail_all(item, worker)
                continue
            for output in item:
                self._deliver(output)
            try:
                self._drop_cancelled(worker)
            except Exception:
                log.exception("checking for cancelled streams failed; checked again after the next step")

    def _report_slots(self) -> None:
        count = self._engine.live_slots
        if count != self._reported_slots:
            self._reported_slots = count
            self._on_live_slots(count)

    def _deliver(self, output) -> None:
        with self._lock:
            sink = self._sinks.get(output.request_id)
            chunker = self._chunkers.get(output.request_id)
            if sink is not None and (output.finished or output.error):
                self._forget(output.request_id)
        if sink is None:  # cancelled between the step and now
            return
        try:
            if output.error:
                sink.fail(output.error)
                return
            chunk = chunker.feed(output.window, output.finished)
            if chunk is not None:
                sink.send_window(*chunk)
            if output.finished:
                sink.finish()
        except Exception as exc:
            log.exception("delivering a window of stream %s failed", output.request_id)
            self._end_with_error(output.request_id, sink, f"delivery failed: {type(exc).__name__}: {exc}")

    def _forget(self, request_id: str) -> None:
        """Unregister a stream (the caller holds the lock)."""
        self._sinks.pop(request_id, None)
        self._chunkers.pop(request_id, None)
        self._owner.pop(request_id, None)

    def _own_sinks(self, worker: int) -> list[tuple[str, StreamSink]]:
        """The live sinks this delivery thread uses (the caller holds the lock)."""
        return [(request_id, sink) for request_id, sink in self._sinks.items() if self._owner.get(request_id) == worker]

    def _drop_cancelled(self, worker: int) -> None:
        with self._lock:
            sinks = self._own_sinks(worker)
        # Asked first: if the source raises, the cancellations asked for by cancel() stay pending.
        posted = set()
        if self._cancel_source is not None and sinks:
            posted.update(self._cancel_source([request_id for request_id, _ in sinks]))
        with self._lock:
            asked = {request_id for request_id, _ in sinks if request_id in self._to_cancel}
            self._to_cancel -= asked
            # Ids cancelled but no longer registered (finished meanwhile) are forgotten.
            self._to_cancel &= self._sinks.keys()
        asked |= posted
        polled = [item for item in sinks if item[0] not in asked]
        if len(polled) > self._cancel_checks:
            start = self._next_check[worker] % len(polled)
            self._next_check[worker] = start + self._cancel_checks
            polled = (polled[start:] + polled[:start])[: self._cancel_checks]
        for request_id, sink in [item for item in sinks if item[0] in asked] + polled:
            if request_id not in asked and not sink.is_cancelled():
                continue
            self._release(request_id)
            try:
                sink.finish()
            except Exception as exc:
                log.exception("ending cancelled stream %s failed", request_id)
                self._send_error(request_id, sink, f"ending the stream failed: {type(exc).__name__}: {exc}")

    def _end_with_error(self, request_id: str, sink: StreamSink, message: str) -> None:
        """End a stream with an error: its slot freed, its client told (if it can be)."""
        self._release(request_id)
        self._send_error(request_id, sink, message)

    def _release(self, request_id: str) -> None:
        self._engine.cancel(request_id)
        with self._lock:
            self._forget(request_id)

    @staticmethod
    def _send_error(request_id: str, sink: StreamSink, message: str) -> None:
        try:
            sink.fail(message)
        except Exception:
            log.exception("could not send the error of stream %s", request_id)

    def _fail_all(self, message: str, worker: int) -> None:
        with self._lock:
            sinks = self._own_sinks(worker)
        for request_id, sink in sinks:
            self._end_with_error(request_id, sink, message)
