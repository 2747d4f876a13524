"""CUDA graphs of the vocoder's decode, one per (window length, batch bucket).

The decoder is ~300 small kernels (snake activations, depthwise and 1x1 convs); at small batches
launching them from Python costs more than running them. Windows of one length share one shape,
so a batch of them is padded to a power-of-two bucket (rows are independent: padding rows only
cost work) and one graph replays the whole decoder. Each window shape (length, new patches) that
chunks.PatchChunker makes has its graphs: a stream's first windows are shorter (the stream has
less history) and carry fewer new patches than the later ones, and get graphs of every bucket: a
stream's first audio chunk, the one its first-audio latency waits for, is then a replay and not
~300 eager launches, also when a whole burst of streams starts together (perf/RESULTS.md runs 12
to 14). Every graph is captured up front (`warm_up`), so no capture happens while other threads
drive the GPU (api.py decodes from caller threads beside the engine loop), and captures use
thread-local error mode so work on other threads or devices is not refused meanwhile. The graphs
share one memory pool and static buffers: the caller serialises replays and copies each output to
the host before the next.
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
    def __init__(self, decode: Callable[[torch.Tensor, int], torch.Tensor], latent_dim: int, patch_size: int,
                 shapes: list[tuple[int, int]], dtype: torch.dtype, device: torch.device):
        """decode(latents [B, D, frames], new) -> audio [B, samples of the `new` last patches]: device
        work only, for windows of the (patches, new) `shapes`, patch_size frames per patch."""
        super().__init__(device, "vocoder decodes")
        self.decode = decode
        self.latent_dim = latent_dim
        self.patch_size = patch_size
        self.shapes = frozenset(shapes)
        self.dtype = dtype

    def get(self, rows: int, patches: int, new: int = 1) -> DecodeGraph | None:
        """The graph of the smallest bucket holding `rows` windows of `patches` patches, `new` of
        them new; None past the largest bucket, for a shape without graphs or after a failed capture."""
        bucket = next((b for b in BUCKETS if b >= rows), None)
        if bucket is None or (patches, new) not in self.shapes:
            return None
        return self.cached((patches, new, bucket), lambda: self._capture(bucket, patches, new))

    def warm_up(self) -> None:
        for patches, new in sorted(self.shapes):
            for bucket in BUCKETS:
                self.get(bucket, patches, new)

    def _capture(self, bucket: int, patches: int, new: int) -> DecodeGraph:
        shape = (bucket, self.latent_dim, patches * self.patch_size)
        latents = torch.zeros(shape, dtype=self.dtype, device=self.device)
        graph, audio = self.capture(lambda x: self.decode(x, new), (latents,))  # on its device (GraphCache)
        return DecodeGraph(latents, audio, graph)
