"""Work queued beside the current CUDA stream, for a kernel whose input is ready before the kernel
ahead of it in the layer finishes.

A folded LocDiT layer (DecoderLayer.folded_forward) needs the residual stream's row statistic
(ops.row_scale) only once the qkv GEMM's output is consumed, and both read nothing but the stream:
queued beside the GEMM instead of before it, the ~2 us statistic kernel leaves the chain of
dependent kernels that makes up the layer's fixed cost (perf/RESULTS.md run 63). The fork and the
join are event waits, which a CUDA graph captures as edges between the two streams' kernels.
"""

from __future__ import annotations

import threading

import torch

_streams: dict[int, torch.cuda.Stream] = {}
_lock = threading.Lock()


def _stream(device: torch.device) -> torch.cuda.Stream:
    index = device.index if device.index is not None else torch.cuda.current_device()
    with _lock:
        if index not in _streams:
            _streams[index] = torch.cuda.Stream(index)
        return _streams[index]


class Beside:
    """`with Beside(x):` queues the block's work on a second stream that first waits for everything
    queued so far on x's current stream; `join()` makes the current stream wait for that work. Tensors
    the block allocates belong to the second stream: each fork waits for the current stream, so one
    freed there is reused only after the current stream's earlier readers. On the CPU both are no-ops."""

    def __init__(self, like: torch.Tensor):
        self._main = torch.cuda.current_stream(like.device) if like.is_cuda else None
        self._side = _stream(like.device) if like.is_cuda else None
        self._context = None

    def __enter__(self) -> Beside:
        if self._side is not None:
            self._side.wait_stream(self._main)
            self._context = torch.cuda.stream(self._side)
            self._context.__enter__()
        return self

    def __exit__(self, *exc_info) -> None:
        if self._context is not None:
            self._context.__exit__(*exc_info)
            self._context = None

    def join(self) -> None:
        if self._side is not None:
            self._main.wait_stream(self._side)
