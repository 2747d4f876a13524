"""Another thread's CUDA calls go on while a graph cache captures: in the in-process API the engine
captures a new timestep count's graph while callers' threads run the vocoder on the same GPU. An
allocation that needs cudaMalloc in the other thread, made while the capture is open, must neither
fail there nor invalidate the capture (what a global-mode capture does to both)."""

from __future__ import annotations

import threading

import pytest
import torch

from voxcpm_triton.engine.graph_cache import GraphCache

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def test_another_thread_allocates_while_a_cache_captures():
    device = torch.device("cuda")
    capturing, allocated = threading.Event(), threading.Event()
    errors: list[BaseException] = []
    held: list[torch.Tensor] = []

    def step(x: torch.Tensor) -> torch.Tensor:
        if torch.cuda.is_current_stream_capturing():
            capturing.set()
            allocated.wait(30)  # the capture stays open until the other thread has allocated
        return x * 2

    def allocate() -> None:
        capturing.wait(30)
        try:
            # Blocks larger than anything cached so far: the allocator has to call cudaMalloc.
            held.extend(torch.empty(256 << 20, dtype=torch.uint8, device=device) for _ in range(3))
        except BaseException as exc:  # reported by the test's thread
            errors.append(exc)
        finally:
            allocated.set()

    other = threading.Thread(target=allocate)
    other.start()
    cache = GraphCache(device, "test steps")
    x = torch.ones(4, device=device)
    graph = cache.cached("step", lambda: cache.capture(step, (x,))[0])
    other.join()
    assert errors == [] and len(held) == 3
    assert cache.failure is None and graph is not None
    graph.replay()
    torch.cuda.synchronize()
