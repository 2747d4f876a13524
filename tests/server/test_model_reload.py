"""Explicit model control, as Triton users reload a model after changing its config: unloading the
ar_decoder takes the `voxcpm` ensemble with it (requests then fail with a clear error, not a hang),
loading it again brings both back, and the reloaded decoder streams the same audio for the same
seed. A reload of the text_encoder keeps the voices registered in the server's own folder; an unload
of every instance removes them. Its own server: the session's shared one must keep its models loaded."""

from __future__ import annotations

import json
import time
import urllib.request

import numpy as np
import pytest

from client.streaming import VoxCPMClient, VoxCPMError
from tritonserver_process import REPO, start_server
from voxcpm_triton.serving.cancel_board import board_folder
from voxcpm_triton.voice_cache import voices_folder

pytestmark = pytest.mark.server


def _post(server, path: str) -> dict | list:
    request = urllib.request.Request(f"http://{server.http_url}{path}", data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=180) as reply:
        body = reply.read()
    return json.loads(body) if body else {}


def _states(server) -> dict[str, str]:
    return {entry["name"]: entry["state"] for entry in _post(server, "/v2/repository/index")}


def _audio(server, text: str) -> np.ndarray:
    client = VoxCPMClient(server.grpc_url, timeout_s=60)
    return np.concatenate(list(client.stream(text, seed=3, max_seconds=0.5)))


@pytest.fixture()
def explicit_server(tiny_checkpoint, tmp_path):
    server = start_server(REPO / "model_repository", tmp_path, {"VOXCPM_CHECKPOINT": str(tiny_checkpoint)},
                          extra_args=("--model-control-mode", "explicit", "--load-model", "*"))
    yield server
    server.stop()


def test_unload_and_reload_the_decoder(explicit_server):
    server = explicit_server
    before = _audio(server, "Before the reload.")
    board = board_folder(server.process.pid)  # the decoder instances' shared cancel board
    assert board.is_dir()

    _post(server, "/v2/repository/models/ar_decoder/unload")
    deadline = time.monotonic() + 60
    while _states(server)["ar_decoder"] != "UNAVAILABLE" and time.monotonic() < deadline:
        time.sleep(0.2)
    states = _states(server)
    assert states["ar_decoder"] == states["voxcpm"] == "UNAVAILABLE", states
    assert not board.exists(), "the last decoder instance to stop removes the board"
    with pytest.raises(VoxCPMError, match="voxcpm"):
        _audio(server, "Nobody is there.")

    _post(server, "/v2/repository/models/ar_decoder/load")  # returns once loaded
    assert set(_states(server).values()) == {"READY"}
    np.testing.assert_array_equal(_audio(server, "Before the reload."), before)
    assert server.wait_idle() == 0


def test_a_text_encoder_reload_keeps_the_servers_voices_and_an_unload_removes_them(explicit_server):
    server = explicit_server
    client = VoxCPMClient(server.grpc_url, timeout_s=60)
    voice = (0.3 * np.sin(np.arange(8000) * 0.05)).astype(np.float32)
    client.register_voice("kept", reference_audio=voice, reference_sample_rate=16000)
    folder = voices_folder(server.process.pid)
    assert len(list(folder.glob("*.pt"))) == 1

    _post(server, "/v2/repository/models/text_encoder/load")  # loaded already: Triton reloads it
    assert set(_states(server).values()) == {"READY"}
    assert list(client.stream("Still here.", seed=3, voice_id="kept", max_seconds=0.3))

    _post(server, "/v2/repository/models/text_encoder/unload")
    deadline = time.monotonic() + 60
    while _states(server)["text_encoder"] != "UNAVAILABLE" and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not folder.exists(), "the last text_encoder instance to stop removes the server's own voices"
