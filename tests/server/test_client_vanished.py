"""A `voxcpm` stream whose client goes away without a CANCEL_ID (killed, or a plain gRPC
cancellation) frees its decoder slot within seconds, also when it left while the stream still
queued for a slot. Triton 2.51 stops forwarding the ensemble's windows to the vocoder but never
tells the decoder; the vocoder's per-stream stamps (voxcpm_triton/serving/window_acks.py) are how
the decoder learns it. Before them such a stream held its slot to its length limit (14.6 s here,
perf/RESULTS.md run 58)."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import time
import uuid

import pytest
import tritonclient.grpc as grpcclient

from client.streaming import VoxCPMClient, build_inputs
from conftest import server_with_decoder_config
from tritonserver_process import REPO

pytestmark = pytest.mark.server

# window_acks.ABANDONED_AFTER_S (5) + CONFIRM_S (1), the decoder's polling and back-pressure pauses.
# The log line below, not the time, tells an abandoned stream from one that reached its length limit.
FREED_WITHIN_S = 10.0
# So that limit must lie well past FREED_WITHIN_S on any machine. Once nothing is decoded, the
# back-pressure gate paces the stream (a few windows per 0.25 s wait) whatever the CPU: the text
# leaves the most patches the tiny checkpoint's 512 positions allow (~80 tokens, under the runaway
# guard's 6 patches a token), and 40 LocDiT timesteps make each window dearer. A text 4x longer
# (fewer patches: its prompt took the room) ended by itself 5.4 s after the kill on an AVX-512 CPU.
LONG_TEXT = "Many words to say here, and then some more. " * 3
TIMESTEPS = 40
ENDED = "none decoded for a while (client gone)"


def freed_after(server, since: float) -> float:
    assert server.wait_idle(timeout_s=60) == 0, "the abandoned stream's slot was never freed"
    return time.monotonic() - since


def test_a_killed_client_frees_its_slot(triton_server):
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from client.streaming import VoxCPMClient\n"
            "client = VoxCPMClient(sys.argv[2])\n"
            "stream = client.stream(sys.argv[3], max_seconds=600, seed=3, timesteps=int(sys.argv[4]))\n"
            "for chunk in stream:\n"
            "    print('chunk', flush=True)\n")
    ended_before = triton_server.log().count(ENDED)
    client = subprocess.Popen(
        [sys.executable, "-c", code, str(REPO), triton_server.grpc_url, LONG_TEXT, str(TIMESTEPS)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert client.stdout.readline() == "chunk\n"
        assert triton_server.live_slots() == 1
    finally:
        client.send_signal(signal.SIGKILL)
        client.wait()
    killed = time.monotonic()
    assert freed_after(triton_server, killed) < FREED_WITHIN_S
    assert triton_server.log().count(ENDED) == ended_before + 1, "not ended as abandoned"
    audio, _, _ = VoxCPMClient(triton_server.grpc_url).synthesize("Next one.", max_seconds=0.3, seed=4)
    assert audio.size > 0


def test_a_plain_grpc_cancellation_frees_its_slot(triton_server):
    replies: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(triton_server.grpc_url)
    client.start_stream(callback=lambda result, error: replies.put((result, error)))
    request_id = uuid.uuid4().hex
    client.async_stream_infer("voxcpm", build_inputs(LONG_TEXT, max_seconds=600, seed=5, timesteps=TIMESTEPS),
                              request_id=request_id)
    result, error = replies.get(timeout=60)
    assert error is None and result.as_numpy("AUDIO").size > 0
    client.stop_stream(cancel_requests=True)  # no CANCEL_ID to the decoder
    cancelled = time.monotonic()
    assert freed_after(triton_server, cancelled) < FREED_WITHIN_S
    assert f"ending stream '{request_id}'" in triton_server.log(), "not ended as abandoned"


@pytest.fixture(scope="module")
def one_slot_server(tiny_checkpoint, tmp_path_factory):
    yield from server_with_decoder_config(tiny_checkpoint, tmp_path_factory.mktemp("one-slot"),
                                          'key: "max_slots" value: { string_value: "16" }',
                                          'key: "max_slots" value: { string_value: "1" }')


def test_a_stream_whose_client_left_while_it_queued_is_ended_once_admitted(one_slot_server):
    # None of its windows is ever decoded, unlike the streams above, whose first ones were.
    holder = VoxCPMClient(one_slot_server.grpc_url).stream(LONG_TEXT, max_seconds=600, seed=6, timesteps=TIMESTEPS)
    next(holder)  # holds the only slot
    client = grpcclient.InferenceServerClient(one_slot_server.grpc_url)
    client.start_stream(callback=lambda result, error: None)
    request_id = uuid.uuid4().hex
    client.async_stream_infer("voxcpm", build_inputs(LONG_TEXT, max_seconds=600, seed=7, timesteps=TIMESTEPS),
                              request_id=request_id)
    time.sleep(2.0)  # through the text_encoder, into the decoder's queue
    client.stop_stream(cancel_requests=True)
    holder.close()  # ends the holder with a CANCEL_ID: the queued stream takes the slot
    admitted = time.monotonic()
    assert freed_after(one_slot_server, admitted) < FREED_WITHIN_S
    assert f"ending stream '{request_id}'" in one_slot_server.log(), "not ended as abandoned"
