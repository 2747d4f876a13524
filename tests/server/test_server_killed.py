"""A tritonserver killed mid-stream (SIGKILL: an OOM kill, a crash) leaves no model process behind,
and the client's stream ends with an error instead of waiting. Before serving/orphan_guard.py the
ar_decoder's stub outlived its server indefinitely (on a GPU, with its memory)."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from client.streaming import VoxCPMClient, VoxCPMError
from tests.process_state import children, running, still_running
from tritonserver_process import REPO, start_server

pytestmark = pytest.mark.server


def test_killed_server_leaves_no_model_process(tiny_checkpoint, tmp_path):
    server = start_server(REPO / "model_repository", tmp_path, {"VOXCPM_CHECKPOINT": str(tiny_checkpoint)})
    stubs = children(server.process.pid)
    try:
        assert len(stubs) >= 3, "one stub per model instance"
        first_chunk, ended = threading.Event(), {}

        def listen() -> None:
            try:
                for _ in VoxCPMClient(server.grpc_url, timeout_s=60).stream("A stream that will not end.",
                                                                             max_seconds=600):
                    first_chunk.set()
                ended["how"] = "finished"
            except VoxCPMError as exc:
                ended["how"] = f"error: {exc}"

        listener = threading.Thread(target=listen, daemon=True)
        listener.start()
        assert first_chunk.wait(60)
        server.process.send_signal(signal.SIGKILL)
        server.process.wait(timeout=10)

        assert not still_running(stubs, within_s=10, poll_s=0.2), "model processes outlived their server"
        listener.join(10)
        assert ended.get("how", "").startswith("error"), ended
    finally:
        for pid in stubs:  # whatever is left, so that no test after this one shares the machine with it
            if running(pid):
                os.kill(pid, signal.SIGKILL)
        server.stop()
