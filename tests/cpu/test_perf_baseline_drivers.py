"""How the baseline benches drive their systems, with fakes in place of the models: one record per
request with its chunks, clients' rounds, and the reference's one-at-a-time service."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np

from perf.baselines.nanovllm_bench import make_run_level as nano_run_level
from perf.baselines.reference_bench import FifoLock
from perf.baselines.reference_bench import make_run_level as reference_run_level


class FakeNanoPool:
    """Streams `patches` chunks per request, interleaving requests like a batching server."""

    def __init__(self):
        self.calls = []

    async def generate(self, target_text, max_generate_length, cfg_value, seed):
        self.calls.append((target_text, max_generate_length, cfg_value, seed))
        for _ in range(max_generate_length):
            await asyncio.sleep(0.001)
            yield np.zeros(7680, dtype=np.float32)


def test_nano_driver_rounds_and_chunks():
    loop = asyncio.new_event_loop()
    pool = FakeNanoPool()
    try:
        records = nano_run_level(loop, pool, patches=3, seed=10)(4, 2, 100)
    finally:
        loop.close()
    assert sorted(r.request_id for r in records) == [f"nano-{i}" for i in range(100, 108)]
    assert all(r.ok and r.chunks == 3 and r.audio_samples == 3 * 7680 for r in records)
    assert sorted(seed for *_, seed in pool.calls) == list(range(110, 118))
    assert {length for _, length, _, _ in pool.calls} == {3}


class FakeReference:
    """generate_streaming that notices overlapping calls (the reference model cannot batch)."""

    def __init__(self):
        self.active = 0
        self.max_active = 0
        self.guard = threading.Lock()
        self.kwargs = []

    def generate_streaming(self, text, **kwargs):
        self.kwargs.append(kwargs)
        with self.guard:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            for _ in range(kwargs["max_len"]):
                time.sleep(0.002)
                yield np.zeros(7680, dtype=np.float32)
        finally:
            with self.guard:
                self.active -= 1


def test_reference_driver_serialises_requests():
    tts = FakeReference()
    records = reference_run_level(tts, patches=4, seed=0)(3, 1, 0)
    assert len(records) == 3 and all(r.ok and r.chunks == 4 for r in records)
    assert tts.max_active == 1
    assert all(k["min_len"] == k["max_len"] == 4 and k["retry_badcase"] is False for k in tts.kwargs)
    # served one after another: each request's audio starts after the previous one finished
    served = sorted(records, key=lambda r: r.first_audio_at)
    assert all(b.first_audio_at >= a.finished_at for a, b in zip(served, served[1:]))


def test_the_reference_queue_is_first_come_first_served():
    # Each client asks again the moment its request ends; with an unfair lock it got the lock back
    # before the waiting clients, and its second request skipped the queue.
    lock, order, asked = FifoLock(), [], threading.Barrier(3)

    def client(name: str) -> None:
        asked.wait()
        for round_ in range(2):
            with lock:
                order.append((name, round_))
                time.sleep(0.02)

    threads = [threading.Thread(target=client, args=(name,)) for name in "abc"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [round_ for _, round_ in order] == [0, 0, 0, 1, 1, 1], order
