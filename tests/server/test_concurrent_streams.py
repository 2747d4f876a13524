"""Eight concurrent streams of mixed length through the ensemble each equal their solo output: the
engine's batching and the vocoder's dynamic batching do not mix streams. More streams than the
decoder has slots all complete: the rest wait in its queue."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from client.streaming import VoxCPMClient

pytestmark = pytest.mark.server

REQUESTS = [
    ("Short one.", 0.3, 1),
    ("A somewhat longer sentence to speak.", 1.6, 2),
    ("Mid length text here.", 0.8, 3),
    ("Tiny.", 0.5, 4),
    ("Another sentence of a different length.", 1.2, 5),
    ("Numbers: one, two, three.", 1.0, 6),
    ("Hello again.", 0.6, 7),
    ("The last of the eight streams.", 1.4, 8),
]


def _run(url: str, text: str, max_seconds: float, seed: int) -> list[np.ndarray]:
    return list(VoxCPMClient(url).stream(text, max_seconds=max_seconds, seed=seed))


def test_eight_concurrent_streams_equal_their_solo_output(triton_server):
    url = triton_server.grpc_url
    solo = [_run(url, *request) for request in REQUESTS]
    with ThreadPoolExecutor(len(REQUESTS)) as pool:
        together = list(pool.map(lambda request: _run(url, *request), REQUESTS))
    assert len({sum(chunk.size for chunk in chunks) for chunks in solo}) > 1, "the streams should differ in length"
    for (text, _, _), alone, batched in zip(REQUESTS, solo, together):
        assert [chunk.size for chunk in batched] == [chunk.size for chunk in alone], text
        np.testing.assert_allclose(np.concatenate(batched), np.concatenate(alone), rtol=0, atol=1e-5, err_msg=text)
    assert triton_server.wait_idle() == 0


def test_more_streams_than_decoder_slots_all_complete(triton_server):
    # The CPU config's ar_decoder holds 16 streams; the others wait in its engine's queue and are
    # admitted as slots free up, each still giving its solo audio.
    requests = [(f"Stream number {index} of many.", 3.0, 100 + index) for index in range(24)]
    url = triton_server.grpc_url
    peak, done = [0.0], threading.Event()

    def watch_slots() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], triton_server.live_slots())
            time.sleep(0.05)

    watcher = threading.Thread(target=watch_slots)
    watcher.start()
    try:
        with ThreadPoolExecutor(len(requests)) as pool:
            together = list(pool.map(lambda request: _run(url, *request), requests))
    finally:
        done.set()
        watcher.join()
    assert peak[0] == 16, f"the decoder's 16 slots should all have been taken (peak {peak[0]})"
    for index in (0, len(requests) - 1):
        alone = np.concatenate(_run(url, *requests[index]))
        np.testing.assert_allclose(np.concatenate(together[index]), alone, rtol=0, atol=1e-5)
    assert all(sum(chunk.size for chunk in chunks) > 0 for chunks in together)
    assert triton_server.wait_idle() == 0
