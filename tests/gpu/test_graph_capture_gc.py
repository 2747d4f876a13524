"""A CUDA graph left in a reference cycle must not break a later capture. Before the collector was
paused, the collector could run mid-capture, destroy that graph (cudaGraphExecDestroy, refused
during a global capture) and invalidate the capture: one capture per GPU test run failed that way
(perf/RESULTS.md run 25), its cache fell back to eager, and torch's generator stayed in capture
state."""

from __future__ import annotations

import gc

import pytest
import torch

from voxcpm_triton.engine.graph_cache import GraphCache

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


class Cycle:
    def __init__(self, held: object) -> None:
        self.held = held
        self.me = self


def test_a_stale_graph_collected_during_capture_does_not_invalidate_it():
    device = torch.device("cuda")
    stale = torch.cuda.CUDAGraph()
    with torch.cuda.graph(stale):
        torch.zeros(1, device=device)
    held = [stale]
    del stale

    def step(x: torch.Tensor) -> torch.Tensor:
        if torch.cuda.is_current_stream_capturing() and held:
            Cycle(held.pop())  # young garbage, reachable only from itself: the next collection frees it
            _ = [[] for _ in range(1000)]  # enough allocations for an automatic collection
        return x * 2

    cache = GraphCache(device, "test steps")
    x = torch.ones(4, device=device)
    thresholds = gc.get_threshold()
    gc.set_threshold(1)
    try:
        graph = cache.cached("step", lambda: cache.capture(step, (x,))[0])
    finally:
        gc.set_threshold(*thresholds)
    assert cache.failure is None and graph is not None
    graph.replay()
    gc.collect()  # the stale graph goes now, outside any capture
    torch.randn(4, device=device)  # the generator is out of capture state
