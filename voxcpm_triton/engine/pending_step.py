"""A decode step whose device work is queued and whose output has not been read on the host yet.

`ModelRunner.launch` returns one, so the engine can queue step n+1 before it reads step n: the GPU
then runs the next step while the host books the last one, instead of idling through it. The step's
host-side buffers (the index it uploads, the output it downloads into) are pinned and come from
`StagingBuffers`, which alternates two sets: the step in flight keeps its set while the next
step fills the other.
"""

from __future__ import annotations

import numpy as np
import torch


class PendingStep:
    def __init__(self, host_out: torch.Tensor, batch: int, patch_shape: tuple[int, int],
                 done: torch.cuda.Event | None):
        """host_out [>= batch, P * D + 1] float32: patches then the stop flag per row, filled once
        `done` has passed (None: already filled)."""
        self._host_out = host_out
        self._batch = batch
        self._patch_shape = patch_shape
        self._done = done
        self._result: tuple[np.ndarray, np.ndarray] | None = None

    @classmethod
    def ready(cls, host_out: np.ndarray, patch_shape: tuple[int, int]) -> PendingStep:
        """A step computed synchronously (the reference path); host_out as in __init__, as numpy."""
        return cls(torch.from_numpy(host_out), host_out.shape[0], patch_shape, None)

    def result(self) -> tuple[np.ndarray, np.ndarray]:
        """(patches float32 [B, P, D], stop flags bool [B]); waits for the device work first."""
        if self._result is None:
            if self._done is not None:
                self._done.synchronize()
            # A copy: the staging buffer is refilled two steps later.
            host = self._host_out[:self._batch].numpy().copy()
            self._result = host[:, :-1].reshape(self._batch, *self._patch_shape), host[:, -1] > 0.5
            self._host_out = self._done = None
        return self._result


class StagingBuffers:
    """Two sets of host buffers (step index upload [2, rows] int64, step output download [rows, width]
    float32), used in turn.

    Before a set is reused, the step that last used it is read out (`PendingStep.result`), so
    its output survives even when the caller has not collected it yet."""

    def __init__(self, rows: int, width: int, device: torch.device):
        self._pinned = device.type == "cuda"
        self._device = device
        self._width = width
        self._index = [self._alloc((2, rows), torch.int64) for _ in range(2)]
        self._out = [self._alloc((rows, width), torch.float32) for _ in range(2)]
        self._events = [torch.cuda.Event() for _ in range(2)] if self._pinned else [None, None]
        self._last: list[PendingStep | None] = [None, None]
        self._turn = 0

    def _alloc(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        return torch.zeros(shape, dtype=dtype, pin_memory=self._pinned)

    def take(self, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        """This step's index buffer [2, rows] (contiguous: one copy uploads it) and output buffer
        [rows, width]."""
        turn = self._turn
        if self._last[turn] is not None:
            self._last[turn].result()
            self._last[turn] = None
        if rows > self._out[turn].shape[0]:
            self._index[turn] = self._alloc((2, rows), torch.int64)
            self._out[turn] = self._alloc((rows, self._width), torch.float32)
        return self._index[turn].view(-1)[:2 * rows].view(2, rows), self._out[turn][:rows]

    def launched(self, pending: PendingStep) -> PendingStep:
        """Record the step that now owns the current set; the next take() uses the other one."""
        self._last[self._turn] = pending
        self._turn ^= 1
        return pending

    def done_event(self) -> torch.cuda.Event | None:
        """The current set's event, recorded on the device's current stream after the step's download
        (None on the CPU, where the download is synchronous)."""
        event = self._events[self._turn]
        if event is not None:
            event.record(torch.cuda.current_stream(self._device))
        return event
