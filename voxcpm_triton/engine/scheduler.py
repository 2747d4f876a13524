"""Scheduler: which streams run this step, and the bookkeeping of what they produced.

It owns host-side state only (queue, slots, per-stream counters and the left-context windows of
recent patches); the runner owns everything on the device.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from voxcpm_triton.engine.patch_windows import PatchWindows
from voxcpm_triton.engine.request import GenerationRequest, StepOutput
from voxcpm_triton.engine.slots import SlotPool


@dataclass
class Stream:
    request: GenerationRequest
    slot: int
    budget: int  # most patches it may produce
    produced: int = 0  # patches booked
    # Decode steps queued (ModelRunner.launch); ahead of `produced` by the step in flight.
    launched: int = 0

    @property
    def position(self) -> int:
        """KV-cache row its next decode step writes."""
        return self.request.prompt_length + self.launched


@dataclass
class Batch:
    admitted: list[Stream]  # need a prefill before this step's decode
    # Every live stream with steps left to launch (admitted ones included), in batch-row order.
    running: list[Stream]


class Scheduler:
    def __init__(self, max_slots: int, max_context: int, window_patches: int, max_prefill_tokens: int | None = None):
        if window_patches < 1:
            raise ValueError(f"window_patches must be >= 1, got {window_patches}")
        if max_prefill_tokens is not None and max_prefill_tokens < 1:
            raise ValueError(f"max_prefill_tokens must be >= 1 or None, got {max_prefill_tokens}")
        self.max_prefill_tokens = max_prefill_tokens
        self.slots = SlotPool(max_slots)
        self.max_context = max_context
        self.window_patches = window_patches
        self.windows = PatchWindows(max_slots, window_patches)
        self.queue: deque[GenerationRequest] = deque()
        self.running: dict[str, Stream] = {}
        self._cancelled: set[str] = set()

    def add(self, request: GenerationRequest) -> None:
        if request.request_id in self.running or any(r.request_id == request.request_id for r in self.queue):
            raise ValueError(f"request_id {request.request_id!r} is already in the engine")
        self.queue.append(request)

    def cancel(self, request_id: str) -> bool:
        """Mark a queued or running stream for removal at the next schedule(); False if unknown."""
        if request_id in self.running or any(r.request_id == request_id for r in self.queue):
            self._cancelled.add(request_id)
            return True
        return False

    @property
    def has_work(self) -> bool:
        return bool(self.queue or self.running or self._cancelled)

    def schedule(self) -> tuple[Batch, list[StepOutput]]:
        """Drop cancelled streams, admit queued requests into free slots, and return the batch.

        Admission is FIFO; with max_prefill_tokens set, a step admits prompts only while their
        total length fits (at least one), so a burst of arrivals does not stall running streams
        behind one huge prefill. (The runner splits one step's admissions into prefill graphs of
        at most prefill_graphs.MAX_ROWS prompts itself.)"""
        ended = [self._end(stream, error="cancelled") for stream in list(self.running.values())
                 if stream.request.request_id in self._cancelled]
        kept = deque()
        for request in self.queue:
            if request.request_id in self._cancelled:
                ended.append(StepOutput(request.request_id, self._empty_window(request), True, "cancelled"))
            else:
                kept.append(request)
        self.queue = kept
        self._cancelled.clear()
        admitted = []
        prefill_tokens = 0
        while self.queue and self.slots.free:
            length = self.queue[0].prompt_length
            if admitted and self.max_prefill_tokens is not None and prefill_tokens + length > self.max_prefill_tokens:
                break
            prefill_tokens += length
            request = self.queue.popleft()
            stream = Stream(request, self.slots.allocate(), request.patch_budget(self.max_context))
            self.windows.start(stream.slot, request.context_patches.detach().to("cpu").float().numpy())
            self.running[request.request_id] = stream
            admitted.append(stream)
        # A stream whose last step is still in flight (Engine with launch_ahead) has none left.
        live = [s for s in self.running.values() if s.launched < s.budget]
        return Batch(admitted, live), ended

    def book(self, batch: Batch, patches: np.ndarray, stop: np.ndarray) -> list[StepOutput]:
        """Record each stream's new patch [P, D] and stop flag; end streams that are done.

        As in the reference loop, step i's patch is always emitted, then the stream ends if the
        stop head fired and i > min_len, or if it has used its patch budget. Rows of streams that
        ended after the step was launched (stopped by the step before, cancelled) are dropped.
        """
        booked = [(row, stream) for row, stream in enumerate(batch.running)
                  if self.running.get(stream.request.request_id) is stream]
        if not booked:
            return []
        count = len(booked)
        if count < len(batch.running):
            rows = np.fromiter((row for row, _ in booked), dtype=np.int64, count=count)
            patches, stop = patches[rows], stop[rows]
        slots = np.fromiter((stream.slot for _, stream in booked), dtype=np.int64, count=count)
        windows = self.windows.push(slots, patches[:count])
        stops = stop[:count].tolist()
        outputs = []
        for (_, stream), window, stopped in zip(booked, windows, stops):
            step = stream.produced
            stream.produced += 1
            finished = (stopped and step > stream.request.min_len) or stream.produced >= stream.budget
            outputs.append(StepOutput(stream.request.request_id, window, finished, None, step))
            if finished:
                self._release(stream)
        return outputs

    def fail(self, streams: list[Stream], message: str) -> list[StepOutput]:
        """End those of `streams` still running (matched as objects: a stream that ended may have a
        successor under its request id, which keeps running)."""
        return [self._end(stream, error=message) for stream in streams
                if self.running.get(stream.request.request_id) is stream]

    def _end(self, stream: Stream, error: str) -> StepOutput:
        self._release(stream)
        return StepOutput(stream.request.request_id, self._empty_window(stream.request), True, error)

    def _release(self, stream: Stream) -> None:
        del self.running[stream.request.request_id]
        self.slots.release(stream.slot)
        # A cancel that arrived after this step was scheduled was for this stream, not for a new
        # request that reuses the id.
        self._cancelled.discard(stream.request.request_id)

    @staticmethod
    def _empty_window(request: GenerationRequest) -> np.ndarray:
        return np.zeros((0, *request.feats.shape[1:]), dtype=np.float32)
