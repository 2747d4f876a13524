"""A model process killed on its own (an out-of-memory kill, say). Triton 2.51 does not restart it:
every request through it fails with "Stub process ... is not healthy" until the server restarts
(README). What this project owns is that nothing else waits on the dead process: the decoder's
back-pressure took a vocoder killed mid-batch for one still decoding for 60 s, so the slots of the
streams it failed stayed taken and a new request got its error a minute late. (Such a server's stop
then times out on the requests Triton still counts in flight, and its shared memory stays for the
next start to remove, as a killed server's.)"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from client.streaming import VoxCPMClient, VoxCPMError
from tritonserver_process import REPO, start_server

pytestmark = pytest.mark.server

TEXT = "A stream that is still speaking when the vocoder's process is killed. " * 2


def _stub_pid(server_pid: int, model: str) -> int:
    listed = subprocess.run(["pgrep", "-af", "triton_python_backend_stub"], capture_output=True, text=True).stdout
    pids = [int(line.split()[0]) for line in listed.splitlines()
            if f"/{model}/1/model.py" in line and f"voxcpm_{server_pid}_" in line]
    assert len(pids) == 1, listed
    return pids[0]


def test_a_killed_vocoder_stalls_nothing(tiny_checkpoint, tmp_path):
    server = start_server(REPO / "model_repository", tmp_path, {"VOXCPM_CHECKPOINT": str(tiny_checkpoint)})
    pid = server.process.pid
    try:
        client = VoxCPMClient(server.grpc_url, timeout_s=60)
        streams = [client.stream(TEXT, max_seconds=60, seed=seed, timesteps=40) for seed in range(4)]
        for stream in streams:
            next(stream)
        os.kill(_stub_pid(pid, "vocoder"), signal.SIGKILL)
        for stream in streams:
            with pytest.raises(VoxCPMError, match="not healthy"):
                list(stream)
        started = time.monotonic()
        with pytest.raises(VoxCPMError, match="not healthy"):
            client.synthesize("Hello.", max_seconds=0.3)
        assert time.monotonic() - started < 10.0  # 59 s when the dead batch counted as decoding
        assert server.wait_idle(timeout_s=30) == 0
    finally:
        server.stop()
