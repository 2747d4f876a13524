"""CUDA graphs of the vocoder's decode of full-length windows, one per batch bucket.

The decoder is ~300 small kernels (snake activations, depthwise and 1x1 convs); at small batches
launching them from Python costs more than running them. Full windows all have one shape, so a
batch of them is padded to a power-of-two bucket (rows are independent: padding rows only cost
work) and one graph replays the whole decoder. Every bucket is captured up front (`warm_up`), so
no capture happens while other threads drive the GPU (api.py decodes from caller threads beside
the engine loop), and captures use thread-local error mode so work on other threads or devices
is not refused meanwhile. The graphs share one memory pool and static buffers: the caller
serialises replays and copies each output to the host before the next.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable

import torch

from voxcpm_triton.engine.cuda_graphs import BUCKETS, WARM_UP_RUNS


@dataclass
class DecodeGraph:
    latents: torch.Tensor  # [bucket, D, frames] static input
    audio: torch.Tensor  # [bucket, samples] static output
    graph: torch.cuda.CUDAGraph

    def run(self, latents: torch.Tensor) -> torch.Tensor:
        """Audio of `latents` [n <= bucket, D, frames]; a view of the static output (copy it
        before the next replay)."""
        rows = latents.shape[0]
        with torch.cuda.device(self.latents.device):
            self.latents[:rows].copy_(latents)
            self.graph.replay()
        return self.audio[:rows]


class DecodeGraphs:
    def __init__(self, decode: Callable[[torch.Tensor], torch.Tensor], latent_shape: tuple[int, int],
                 dtype: torch.dtype, device: torch.device):
        """decode(latents [B, D, frames]) -> audio [B, samples]: device work only."""
        self.decode = decode
        self.latent_shape = latent_shape
        self.dtype = dtype
        self.device = device
        self._graphs: dict[int, DecodeGraph] = {}
        self._pool = None
        self.failure: str | None = None  # set when a capture failed: decode then stays eager

    def get(self, rows: int) -> DecodeGraph | None:
        """The graph of the smallest bucket holding `rows` windows; None past the largest bucket
        or after a failed capture."""
        bucket = next((b for b in BUCKETS if b >= rows), None)
        if bucket is None or self.failure is not None:
            return None
        if bucket not in self._graphs:
            try:
                self._graphs[bucket] = self._capture(bucket)
            except Exception as exc:  # decode eagerly rather than not at all
                self.failure = f"CUDA graph capture of vocoder bucket {bucket} failed: {exc!r}"
                warnings.warn(self.failure + "; the vocoder runs eagerly", RuntimeWarning, stacklevel=2)
                torch.cuda.synchronize(self.device)
                return None
        return self._graphs[bucket]

    def warm_up(self) -> None:
        for bucket in BUCKETS:
            self.get(bucket)

    @property
    def captured(self) -> list[int]:
        return sorted(self._graphs)

    def _capture(self, bucket: int) -> DecodeGraph:
        with torch.cuda.device(self.device):
            return self._capture_here(bucket)

    def _capture_here(self, bucket: int) -> DecodeGraph:
        latents = torch.zeros(bucket, *self.latent_shape, dtype=self.dtype, device=self.device)
        current = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(current)
        with torch.cuda.stream(side):  # warm-up runs pick cuDNN algorithms outside the capture
            for _ in range(WARM_UP_RUNS):
                self.decode(latents)
        current.wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool, capture_error_mode="thread_local"):
            audio = self.decode(latents)
        self._pool = graph.pool()
        return DecodeGraph(latents, audio, graph)
