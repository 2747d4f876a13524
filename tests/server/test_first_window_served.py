"""The ar_decoder's first-window gate in a real server: with it on, streams give the same audio as
without it, and the vocoder's acknowledgement of each first window (not the gate's time limit)
releases the decoder.

The GPU config turns the gate on and the CPU config leaves it off, so the server runs a copy of
model_repository/ whose CPU config turns it on, with the largest limit (1 s), far beyond what decoding one
window takes. A gate that missed the acknowledgement would hold every stream's second window back
by that limit."""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import server_with_decoder_config
from test_concurrent_streams import REQUESTS, _run

from client.streaming import VoxCPMClient

pytestmark = pytest.mark.server

OFF = 'parameters { key: "first_window_wait_ms" value: { string_value: "0" } }'
ON = 'parameters { key: "first_window_wait_ms" value: { string_value: "1000" } }'
LIMIT_S = 1.0


@pytest.fixture(scope="module")
def gated_server(tiny_checkpoint, tmp_path_factory):
    yield from server_with_decoder_config(tiny_checkpoint, tmp_path_factory.mktemp("first-window"), OFF, ON)


def test_streams_equal_the_ungated_server_and_are_released_by_the_vocoder(gated_server, triton_server):
    for text, seconds, seed in REQUESTS[:3]:
        started = time.monotonic()
        arrivals = []
        chunks = []
        for chunk in VoxCPMClient(gated_server.grpc_url).stream(text, max_seconds=seconds, seed=seed):
            arrivals.append(time.monotonic() - started)
            chunks.append(chunk)
        ungated = _run(triton_server.grpc_url, text, seconds, seed)
        assert [chunk.size for chunk in chunks] == [chunk.size for chunk in ungated], text
        np.testing.assert_allclose(np.concatenate(chunks), np.concatenate(ungated), rtol=0, atol=1e-5, err_msg=text)
        assert len(arrivals) > 1, text
        # The second chunk comes one decoder step after the first window was decoded, long before
        # the gate would have given up waiting.
        assert arrivals[1] - arrivals[0] < LIMIT_S / 2, (text, arrivals)
    assert gated_server.wait_idle() == 0
