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

from dataclasses import dataclass
from typing import Callable

import torch

from voxcpm_triton.engine.cuda_graphs import BUCKETS
from voxcpm_triton.engine.graph_cache import GraphCache


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


class DecodeGraphs(GraphCache[DecodeGraph]):
    def __init__(self, decode: Callable[[torch.Tensor], torch.Tensor], latent_shape: tuple[int, int],
                 dtype: torch.dtype, device: torch.device):
        """decode(latents [B, D, frames]) -> audio [B, samples]: device work only."""
        super().__init__(device, "vocoder decodes", capture_error_mode="thread_local")
        self.decode = decode
        self.latent_shape = latent_shape
        self.dtype = dtype

    def get(self, rows: int) -> DecodeGraph | None:
        """The graph of the smallest bucket holding `rows` windows; None past the largest bucket
        or after a failed capture."""
        bucket = next((b for b in BUCKETS if b >= rows), None)
        if bucket is None:
            return None
        return self.cached(bucket, lambda: self._capture(bucket))

    def warm_up(self) -> None:
        for bucket in BUCKETS:
            self.get(bucket)

    def _capture(self, bucket: int) -> DecodeGraph:
        with torch.cuda.device(self.device):
            latents = torch.zeros(bucket, *self.latent_shape, dtype=self.dtype, device=self.device)
            graph, audio = self.capture(self.decode, (latents,))
        return DecodeGraph(latents, audio, graph)
