"""More streams than the CPU vocoder keeps up with (a batch of a few dozen windows takes it seconds):
ar_decoder's back-pressure holds the vocoder's queue to `windows_ahead` windows per live stream plus
one step's windows, and once every stream is cancelled the next request is served at once instead
of after the cancelled streams' backlog."""

import threading
import time

import pytest

from client.streaming import VoxCPMClient

pytestmark = pytest.mark.server

STREAMS = 16  # the CPU config's max_slots
WINDOWS_AHEAD = 2  # and its windows_ahead
TEXT = "A sentence long enough that the stream outlives the test unless it is cancelled, which it is."


def test_vocoder_queue_stays_bounded_and_cancelled_backlog_is_not_waited_for(triton_server):
    url = triton_server.grpc_url
    stop = threading.Event()

    def listen(seed: int) -> None:
        for _ in VoxCPMClient(url, timeout_s=60).stream(TEXT, max_seconds=60.0, seed=seed):
            if stop.is_set():
                break  # the client library cancels the stream on the server

    threads = [threading.Thread(target=listen, args=(seed,)) for seed in range(STREAMS)]
    for thread in threads:
        thread.start()
    peak, until = 0.0, time.monotonic() + 6.0
    while time.monotonic() < until:
        peak = max(peak, triton_server.metric("nv_inference_pending_request_count", model="vocoder"))
        time.sleep(0.2)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a cancelled stream did not end"
    assert peak <= (WINDOWS_AHEAD + 1) * STREAMS, f"{peak:.0f} windows waited for the vocoder"
    assert triton_server.wait_idle(timeout_s=10) == 0, "a slot leaked"
    started = time.monotonic()
    audio, _, _ = VoxCPMClient(url, timeout_s=60).synthesize("Still serving.", max_seconds=0.3, seed=1)
    assert audio.size > 0 and time.monotonic() - started < 10.0
