"""Triton's HTTP generate_stream endpoint (server-sent events) serves the decoupled `voxcpm` ensemble
as gRPC streaming does: the same chunks for the same text and seed (NORMALIZE as a JSON boolean too),
and a bad input is an HTTP error naming it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import numpy as np
import pytest

from client.streaming import VoxCPMClient

pytestmark = pytest.mark.server


def _post(server, body: dict) -> urllib.request.Request:
    return urllib.request.Request(f"http://{server.http_url}/v2/models/voxcpm/generate_stream",
                                  data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})


def _events(server, body: dict) -> list[dict]:
    """Every `data:` event of one generate_stream call, as JSON."""
    with urllib.request.urlopen(_post(server, body), timeout=120) as reply:
        assert reply.headers.get("Content-Type", "").startswith("text/event-stream")
        text = reply.read().decode()
    return [json.loads(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: ")]


@pytest.mark.parametrize("options", [{}, {"NORMALIZE": True}])
def test_generate_stream_gives_the_grpc_stream_chunks(triton_server, options):
    if options:
        pytest.importorskip("wetext")
    text, seed, seconds = "Hello over HTTP at 7 pm.", 7, 0.8
    events = _events(triton_server, {"TEXT": text, "SEED": seed, "MAX_SECONDS": seconds, **options})
    http_chunks = [np.asarray(event["AUDIO"], dtype=np.float32) for event in events if event.get("AUDIO")]
    assert {event["SAMPLE_RATE"] for event in events if "SAMPLE_RATE" in event} == {48000}

    client = VoxCPMClient(triton_server.grpc_url, timeout_s=60)
    grpc_chunks = [chunk for chunk in client.stream(text, seed=seed, max_seconds=seconds,
                                                    normalize=options.get("NORMALIZE")) if chunk.size]
    assert [c.size for c in http_chunks] == [c.size for c in grpc_chunks]
    assert len(http_chunks) >= 3  # 1, 2, then up to chunk_patches patches per chunk
    for got, want in zip(http_chunks, grpc_chunks):
        np.testing.assert_array_equal(got, want)  # JSON carries float32 values exactly


@pytest.mark.parametrize("body, message", [
    ({"TEXT": ""}, "TEXT is empty"),
    ({"TEXT": "Hi.", "VOICE_ID": "nobody"}, "VOICE_ID 'nobody' is not registered"),
    ({"TEXT": "Hi.", "CFG_VALUE": 50.0}, "CFG_VALUE"),
])
def test_generate_stream_bad_input_is_an_http_error(triton_server, body, message):
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(_post(triton_server, body), timeout=60)
    assert caught.value.code == 400
    assert message in caught.value.read().decode()
