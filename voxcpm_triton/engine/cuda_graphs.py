"""CUDA graphs of the device part of a decode step, one per (batch bucket, timesteps).

A graph replays the runner's fixed-shape step over static buffers: `index` [2, bucket] int64 (each
row's state slot, then its noise-ring row; padding rows point at the scratch slot) in, `out`
[bucket, P * D + 1] float32 (patch, stop flag) out. All graphs share one memory pool; they never
run concurrently (one engine step at a time).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import torch

from voxcpm_triton.engine.graph_cache import GraphCache

BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)

StepFn = Callable[[torch.Tensor, list], torch.Tensor]


def graphs_requested() -> bool:
    return os.environ.get("VOXCPM_CUDA_GRAPHS", "1") != "0"


def buckets_for(max_slots: int) -> tuple[int, ...]:
    """Buckets up to the first that holds max_slots (padding rows only touch the scratch slot).

    Past BUCKETS they keep doubling, so that a decoder configured with more slots still replays a
    graph when they are all live instead of falling back to eager steps."""
    chosen = []
    for bucket in BUCKETS:
        chosen.append(bucket)
        if bucket >= max_slots:
            return tuple(chosen)
    while chosen[-1] < max_slots:
        chosen.append(2 * chosen[-1])
    return tuple(chosen)


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


class StepGraphs(GraphCache[StepGraph]):
    def __init__(self, step: StepFn, device: torch.device, max_slots: int, scratch_slot: int):
        super().__init__(device, "decode steps")
        self.step = step
        self.buckets = buckets_for(max_slots)
        self.scratch_slot = scratch_slot

    def bucket_for(self, batch: int) -> int | None:
        return next((b for b in self.buckets if b >= batch), None)

    def get(self, batch: int, timesteps: int) -> StepGraph | None:
        """The graph for this batch size and timestep count (captured on first use); None when the
        batch is larger than every bucket or a capture failed (the runner then stays eager)."""
        bucket = self.bucket_for(batch)
        if bucket is None:
            return None
        return self.cached((bucket, timesteps), lambda: self._capture(bucket, timesteps))

    def warm_up(self, timesteps: int) -> None:
        for bucket in self.buckets:
            self.get(bucket, timesteps)

    @torch.inference_mode()
    def _capture(self, bucket: int, timesteps: int) -> StepGraph:
        index = torch.zeros(2, bucket, dtype=torch.int64, device=self.device)
        index[0] = self.scratch_slot  # every row is padding while warming up and capturing
        graph, out = self.capture(self.step, (index, [(timesteps, None)]))
        return StepGraph(bucket, timesteps, index, out, graph)
