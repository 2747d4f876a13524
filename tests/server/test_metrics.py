"""Triton's metrics endpoint counts the ensemble's requests and exports the decoder's live slots."""

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
