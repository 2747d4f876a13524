"""A server stopped cleanly (SIGTERM) leaves nothing of its own in /dev/shm: the models' shared
boards and the text_encoder's tmpfs voice folder go with their last process. Only a killed server's
are left, for the next start to remove (build/tritonserver.sh, tests/server/test_server_killed.py)."""

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from client.streaming import VoxCPMClient
from tritonserver_process import LAUNCHER, REPO, SETUP_VENV, start_server

pytestmark = pytest.mark.server


def _own_shm(pid: int) -> list[str]:
    return sorted(path.name for path in Path("/dev/shm").glob(f"voxcpm*{pid}*"))


def test_a_stopped_server_leaves_no_shared_memory(tiny_checkpoint, tmp_path):
    server = start_server(REPO / "model_repository", tmp_path, {"VOXCPM_CHECKPOINT": str(tiny_checkpoint)})
    pid = server.process.pid  # build/tritonserver.sh execs tritonserver: the names carry this PID
    try:
        client = VoxCPMClient(server.grpc_url)
        voice = (0.3 * np.sin(np.arange(8000) * 0.05)).astype(np.float32)
        client.register_voice("held", reference_audio=voice, reference_sample_rate=16000)
        assert list(client.stream("Hello.", seed=1, voice_id="held", max_seconds=0.3))
        assert any(name.startswith("voxcpm-voices-") for name in _own_shm(pid))  # the voice is on tmpfs
        server.process.send_signal(signal.SIGTERM)
        server.process.wait(timeout=60)
        assert _own_shm(pid) == []
    finally:
        server.stop()


def _dead_pid() -> int:
    probe = subprocess.Popen(["true"])
    probe.wait()
    return probe.pid  # gone, and not reused this soon


@pytest.mark.skipif(not LAUNCHER.is_file() or Path(sys.prefix).resolve() != SETUP_VENV.resolve(),
                    reason="needs build/setup.sh's venv, which build/tritonserver.sh runs")
def test_the_next_start_removes_a_killed_servers_boards_and_claims(tmp_path):
    pid = _dead_pid()
    left = [Path("/dev/shm") / f"voxcpm-{kind}-{pid}{suffix}"
            for kind in ("acks", "backlog", "cancel") for suffix in ("", ".decoded0", ".k2x_9qz")]
    for path in left:
        path.touch()
    voices = Path("/dev/shm") / f"voxcpm-voices-{pid}"
    voices.mkdir()
    (voices / "0123.pt").touch()
    left += [voices, voices.with_name(f"{voices.name}.a1b2c3")]
    left[-1].touch()
    try:
        # A repository that does not exist: the launcher clears /dev/shm, then tritonserver exits.
        subprocess.run(["bash", str(LAUNCHER), "--model-repository", str(tmp_path / "none")], timeout=120,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert [path.name for path in left if path.exists()] == []
    finally:
        for path in left:
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
