"""CUDA graphs of the device part of a decode step, one per (batch bucket, timesteps).

A graph replays the runner's fixed-shape step over static buffers: `index` [2, bucket] int64 (each
row's state slot, then its noise-ring row; padding rows point at the scratch slot) in, `out`
[bucket, P * D + 1] float32 (patch, stop flag) out. All graphs share one memory pool; they never
run concurrently (one engine step at a time).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
WARM_UP_RUNS = 2  # eager runs before capture: lazy tables, cuBLAS workspaces, compiled kernels

StepFn = Callable[[torch.Tensor, list], torch.Tensor]


def graphs_requested() -> bool:
    return os.environ.get("VOXCPM_CUDA_GRAPHS", "1") != "0"


def buckets_for(max_slots: int) -> tuple[int, ...]:
    """Buckets up to the first that holds max_slots (padding rows only touch the scratch slot)."""
    chosen = []
    for bucket in BUCKETS:
        chosen.append(bucket)
        if bucket >= max_slots:
            break
    return tuple(chosen)


def capture(fn: Callable[..., object], inputs: tuple, device: torch.device, pool) -> tuple[torch.cuda.CUDAGraph, object]:
    """Warm `fn(*inputs)` up on a side stream, then capture it; returns (graph, fn's output)."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(WARM_UP_RUNS):
            fn(*inputs)
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        out = fn(*inputs)
    return graph, out


@dataclass
class StepGraph:
    batch: int
    timesteps: int
    index: torch.Tensor
    out: torch.Tensor
    graph: torch.cuda.CUDAGraph

    def replay(self) -> torch.Tensor:
        self.graph.replay()
        return self.out


class StepGraphs:
    def __init__(self, step: StepFn, device: torch.device, max_slots: int, scratch_slot: int):
        self.step = step
        self.device = device
        self.buckets = buckets_for(max_slots)
        self.scratch_slot = scratch_slot
        self._graphs: dict[tuple[int, int], StepGraph] = {}
        self._pool = None
        self.failure: str | None = None  # set when a capture failed: the runner then stays eager

    def bucket_for(self, batch: int) -> int | None:
        return next((b for b in self.buckets if b >= batch), None)

    def get(self, batch: int, timesteps: int) -> StepGraph | None:
        """The graph for this batch size and timestep count (captured on first use); None when the
        batch is larger than every bucket."""
        bucket = self.bucket_for(batch)
        if bucket is None or self.failure is not None:
            return None
        key = (bucket, timesteps)
        if key not in self._graphs:
            try:
                self._graphs[key] = self._capture(bucket, timesteps)
            except Exception as exc:  # serve eagerly rather than not at all
                self.failure = f"CUDA graph capture of bucket {bucket}, {timesteps} timesteps failed: {exc!r}"
                warnings.warn(self.failure + "; decode steps run eagerly", RuntimeWarning, stacklevel=2)
                torch.cuda.synchronize(self.device)
                return None
        return self._graphs[key]

    def warm_up(self, timesteps: int) -> None:
        for bucket in self.buckets:
            self.get(bucket, timesteps)

    @property
    def captured(self) -> list[tuple[int, int]]:
        return sorted(self._graphs)

    @torch.inference_mode()
    def _capture(self, bucket: int, timesteps: int) -> StepGraph:
        index = torch.zeros(2, bucket, dtype=torch.int64, device=self.device)
        index[0] = self.scratch_slot  # every row is padding while warming up and capturing
        graph, out = capture(self.step, (index, [(timesteps, None)]), self.device, self._pool)
        self._pool = graph.pool()
        return StepGraph(bucket, timesteps, index, out, graph)
