"""CUDA graphs of the prefill of newly admitted streams, one per (rows, padded prompt length).

Admissions are padded to a row bucket (padding rows fill the scratch slot) and their prompts
right-padded to a length bucket (harmless: the LMs are causal, and cache rows past a prompt are
overwritten by decode before any stream reads them). A graph's static inputs are the prompt
tensors plus each row's last position, slot and cfg value; it writes the slots' KV caches and
decode state in place and returns nothing. Only admissions of up to MAX_ROWS prompts are graphed
(VOXCPM_PREFILL_GRAPH_ROWS overrides it, for A/B timing); the runner splits a larger admission into
groups of MAX_ROWS, so every admission whose prompts fit a length bucket replays graphs (an eager
prefill of the full model costs ~90 ms of launches). Admissions without any audio position
(zero-shot prompts) have their own graphs, which skip the LocEnc pass (VoxCPMModel.prefill).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Callable

import torch

from voxcpm_triton.engine.graph_cache import GraphCache

# 16 rather than 4: a burst of 64 zero-shot arrivals prefilled in 26.0 against 48.3 ms on the H200
# (perf/admission_latency.py, RESULTS.md run 9), for a few graphs more at start.
MAX_ROWS = int(os.environ.get("VOXCPM_PREFILL_GRAPH_ROWS", "16"))
if not 1 <= MAX_ROWS <= 256:
    raise ValueError(f"VOXCPM_PREFILL_GRAPH_ROWS={MAX_ROWS}; allowed: 1..256")
LENGTHS = (32, 64, 128, 256, 512)


def length_bucket(longest: int, max_context: int) -> int:
    """The padded prompt length: the first bucket that holds it and fits the cache, else exact."""
    return next((b for b in LENGTHS if longest <= b <= max_context), longest)


def graphable_prefill(rows: int, length: int) -> bool:
    return rows <= MAX_ROWS and length in LENGTHS


@dataclass
class PrefillGraph:
    inputs: tuple[torch.Tensor, ...]
    graph: torch.cuda.CUDAGraph

    def run(self, host_inputs: tuple[torch.Tensor, ...]) -> None:
        for static, host in zip(self.inputs, host_inputs):
            static.copy_(host, non_blocking=True)
        self.graph.replay()


class PrefillGraphs(GraphCache[PrefillGraph]):
    def __init__(self, prefill: Callable[..., None], device: torch.device, input_shapes: Callable[[int, int], tuple],
                 scratch_slot: int):
        """prefill(*inputs, with_audio=...): the device-only prefill; input_shapes(rows, length): the
        host input tensors of an all-padding admission (their shapes and dtypes make the static
        buffers)."""
        super().__init__(device, "prefills")
        self.prefill = prefill
        self.input_shapes = input_shapes
        self.scratch_slot = scratch_slot

    def get(self, rows: int, length: int, with_audio: bool = True) -> PrefillGraph | None:
        if not graphable_prefill(rows, length):
            return None
        return self.cached((rows, length, with_audio), lambda: self._capture(rows, length, with_audio))

    def warm_up(self, max_context: int, rows: tuple[int, ...] = (1,)) -> None:
        """Zero-shot admissions of each row count in `rows` (<= MAX_ROWS), and single prompts with
        audio, at every length bucket that fits the cache: the first-patch paths, captured before
        the first request rather than during it."""
        for count in rows:
            for length in LENGTHS:
                if length <= max_context:
                    self.get(count, length, with_audio=False)
                    if count == 1:
                        self.get(count, length, with_audio=True)

    @torch.inference_mode()
    def _capture(self, rows: int, length: int, with_audio: bool) -> PrefillGraph:
        inputs = tuple(t.to(self.device) for t in self.input_shapes(rows, length))
        graph, _ = self.capture(functools.partial(self.prefill, with_audio=with_audio), inputs)
        return PrefillGraph(inputs, graph)
