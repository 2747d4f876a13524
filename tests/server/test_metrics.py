"""Triton's metrics endpoint counts the ensemble's requests and exports the decoder's live slots."""

import time

import pytest

from client.streaming import VoxCPMClient

pytestmark = pytest.mark.server


def test_metrics_count_requests_and_show_idle_slots(triton_server):
    before = triton_server.metric("nv_inference_request_success", model="voxcpm")
    client = VoxCPMClient(triton_server.grpc_url)
    for seed in range(3):
        client.synthesize("Count me.", max_seconds=0.3, seed=seed)
    assert triton_server.metric("nv_inference_request_success", model="voxcpm") == before + 3
    assert triton_server.metric("nv_inference_request_success", model="text_encoder") >= 3
    assert triton_server.wait_idle() == 0


STEP_COUNTERS = ("voxcpm_decode_steps_total", "voxcpm_decode_stream_steps_total", "voxcpm_decode_step_seconds_total",
                 "voxcpm_decode_gate_seconds_total", "voxcpm_decode_handoff_seconds_total")


def _step_counters(server) -> dict[str, float]:
    return {name: server.metric(name, model="ar_decoder") for name in STEP_COUNTERS}


def test_decoder_step_counters_match_the_patches_streamed(triton_server):
    before = _step_counters(triton_server)
    client = VoxCPMClient(triton_server.grpc_url)
    per_stream = []
    for seed in range(2):
        chunks = list(client.stream("Count my steps.", max_seconds=0.5, seed=seed))
        samples_per_patch = chunks[0].size  # the first window carries one patch
        per_stream.append(sum(chunk.size for chunk in chunks) // samples_per_patch)
    assert triton_server.wait_idle() == 0
    # The engine thread publishes what it has when it runs out of work, just after the last step.
    deadline = time.monotonic() + 10
    after = _step_counters(triton_server)
    while after["voxcpm_decode_stream_steps_total"] - before["voxcpm_decode_stream_steps_total"] < sum(per_stream):
        assert time.monotonic() < deadline, (before, after, per_stream)
        time.sleep(0.05)
        after = _step_counters(triton_server)
    delta = {name: after[name] - before[name] for name in STEP_COUNTERS}
    assert delta["voxcpm_decode_stream_steps_total"] == sum(per_stream)
    assert max(per_stream) <= delta["voxcpm_decode_steps_total"] <= sum(per_stream)
    assert delta["voxcpm_decode_step_seconds_total"] > 0
    assert delta["voxcpm_decode_gate_seconds_total"] >= 0 and delta["voxcpm_decode_handoff_seconds_total"] >= 0
