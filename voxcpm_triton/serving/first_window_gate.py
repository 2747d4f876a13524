"""Let a new stream's first window reach the vocoder's GPU work before the decoder's next step.

Without CUDA MPS the ar_decoder's and the vocoder's processes time-slice the GPU. A stream's first
audio waits for the vocoder to decode its first window, and that decode waits for the decoder's
step, which starts as soon as the previous one ends. On an H100 a one-window vocoder call took
4.9 ms served at one stream, against 0.7 ms alone (perf/RESULTS.md runs 9 and 90). So after a step
that made some streams' first patches, the engine thread waits until the vocoder has decoded
their first windows (AckBoard's per-id count), or at most `wait_s`. The pause costs the running
streams one vocoder call per admission. That is cheap at a few streams and not at many, so it
applies only while at most `max_streams` streams are live. Served on an H100 (run 91), the first
audio at one stream came 4.2 ms sooner without MPS (18.2 -> 14.0 ms) and 0-0.7 ms under MPS.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable, Protocol

from voxcpm_triton.serving.stream_ids import request_id_of


class DecodedWindows(Protocol):
    def decoded(self, request_id: str) -> tuple[int, float] | None: ...


class FirstWindowGate:
    """wait(stream_ids, live_streams): block until each stream's first window has been decoded, or
    `wait_s` has passed. Stream ids are the ar_decoder's (stream_ids.py); the board is
    keyed by the Triton request id, and a stream without one is never waited for."""

    def __init__(self, board: DecodedWindows, wait_s: float, max_streams: int, poll_s: float = 0.0002,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        if wait_s <= 0:
            raise ValueError(f"wait_s={wait_s}; must be > 0 (leave the gate out to turn it off)")
        if max_streams < 1:
            raise ValueError(f"max_streams={max_streams}; must be >= 1")
        self.board = board
        self.wait_s = wait_s
        self.max_streams = max_streams
        self.poll_s = poll_s
        self._clock = clock
        self._sleep = sleep

    def wait(self, stream_ids: Iterable[str], live_streams: int) -> None:
        if live_streams > self.max_streams:
            return
        pending = {request_id_of(stream_id) for stream_id in stream_ids} - {""}
        deadline = self._clock() + self.wait_s
        while pending:
            pending = {request_id for request_id in pending if self.board.decoded(request_id) is None}
            if not pending or self._clock() >= deadline:
                return
            self._sleep(self.poll_s)
