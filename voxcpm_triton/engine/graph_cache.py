"""CUDA graphs captured on first use, one per key, sharing one memory pool.

The decode step, the prefill and the vocoder each keep such a cache. A capture that fails (out of
memory, an op that cannot be captured) switches its cache off for good: the caller then runs
eagerly, slower but correct, and the reason is warned once and kept in `failure`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import torch

from voxcpm_triton.engine import device_guard
from voxcpm_triton.engine.collector_pause import collector_paused
from voxcpm_triton.ops import lt_gemm

WARM_UP_RUNS = 2  # eager runs before capture: lazy tables, cuBLAS workspaces, cuDNN algorithms

G = TypeVar("G")


class GraphCache(Generic[G]):
    def __init__(self, device: torch.device, fallback: str):
        """fallback: what runs eagerly after a failed capture, for the warning ("decode steps")."""
        self.device = device
        self.fallback = fallback
        self._graphs: dict[Hashable, G] = {}
        self._pool = None
        self._capture_stream: torch.cuda.Stream | None = None
        self.failure: str | None = None

    def cached(self, key: Hashable, make: Callable[[], G]) -> G | None:
        """The graph under `key`, made by `make()` on first use; None once a capture has failed."""
        if self.failure is not None:
            return None
        if key not in self._graphs:
            try:
                self._graphs[key] = make()
            except Exception as exc:  # run eagerly rather than not at all
                self.failure = f"CUDA graph capture of {key} failed: {exc!r}"
                warnings.warn(f"{self.failure}; {self.fallback} run eagerly", RuntimeWarning, stacklevel=3)
                torch.cuda.synchronize(self.device)
                return None
        return self._graphs[key]

    @property
    def captured(self) -> list:
        return sorted(self._graphs)

    def capture(self, fn: Callable[..., object], inputs: tuple) -> tuple[torch.cuda.CUDAGraph, object]:
        """Warm `fn(*inputs)` up on a side stream, then capture it into this cache's pool; returns
        (graph, fn's output). The warm-up also picks the cuBLASLt algorithms of its GEMM shapes.
        Both run with this cache's device current, and the capture on a stream of that device:
        torch.cuda.graph's default stream is one per process, on whichever device captured first
        (device_guard.py)."""
        with device_guard.current(self.device):
            current = torch.cuda.current_stream(self.device)
            side = torch.cuda.Stream(self.device)
            side.wait_stream(current)
            with torch.cuda.stream(side), lt_gemm.tuning():
                for _ in range(WARM_UP_RUNS):
                    fn(*inputs)
            current.wait_stream(side)
            if self._capture_stream is None:
                self._capture_stream = torch.cuda.Stream(self.device)
            graph = torch.cuda.CUDAGraph()
            # Thread-local: other threads of the process keep their CUDA calls (an allocation that
            # needs cudaMalloc, say) while this one captures. In the in-process API the engine
            # captures a new timestep count's graph while callers' threads run the vocoder on the
            # same GPU; a global capture would fail their calls and itself.
            with collector_paused(), torch.cuda.graph(graph, pool=self._pool, stream=self._capture_stream,
                                                      capture_error_mode="thread_local"):
                out = fn(*inputs)
        self._pool = graph.pool()
        return graph, out
