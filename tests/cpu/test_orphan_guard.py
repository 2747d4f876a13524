"""exit_with_server ends its process once the parent it was started for is gone, even while the
process's main thread is busy or blocks holding the GIL, and its guard leaves once the process is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.process_state import children, running, still_running
from voxcpm_triton.serving.orphan_guard import stub_server_pid

# The middle process starts a worker that guards against the middle one's death, prints the
# worker's PID and waits; the worker's main thread would otherwise sleep for a minute.
MIDDLE = """
import subprocess, sys, time
worker = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print(worker.pid, flush=True)
time.sleep(60)
"""
WORKER = """
import os, time
from voxcpm_triton.serving.orphan_guard import exit_with_server
exit_with_server(os.getppid(), poll_s=0.05)
time.sleep(60)
"""
# ctypes.PyDLL keeps the GIL through the call: no other thread of this process runs for a minute.
WORKER_HOLDING_THE_GIL = """
import ctypes, os
from voxcpm_triton.serving.orphan_guard import exit_with_server
exit_with_server(os.getppid(), poll_s=0.05)
ctypes.PyDLL(None).sleep(60)
"""


@pytest.mark.parametrize("worker_code", [WORKER, WORKER_HOLDING_THE_GIL], ids=["sleeping", "holding-the-gil"])
def test_worker_ends_when_its_parent_is_killed(worker_code):
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE, worker_code], stdout=subprocess.PIPE, text=True)
    worker = int(middle.stdout.readline())
    try:
        time.sleep(0.5)
        assert running(worker), "the guard must leave a worker with a live parent alone"
        middle.send_signal(signal.SIGKILL)
        middle.wait()
        assert not still_running([worker], within_s=10)
    finally:
        if running(worker):
            os.kill(worker, signal.SIGKILL)


def test_the_guard_leaves_when_its_process_ends():
    worker = subprocess.Popen([sys.executable, "-c", "import os, time\n"
                               "from voxcpm_triton.serving.orphan_guard import exit_with_server\n"
                               "exit_with_server(os.getppid(), poll_s=0.05)\ntime.sleep(0.5)"])
    time.sleep(0.3)
    guards = children(worker.pid)
    assert len(guards) == 1 and running(guards[0])
    worker.wait(10)
    assert not still_running(guards, within_s=10), "a guard must not outlive the process it guards"


def test_the_server_pid_is_the_one_on_the_stubs_command_line():
    # As Triton 2.51 started one in CI; the sixth argument holds while the server is gone.
    stub = ["/x/backends/python/triton_python_backend_stub", "/x/model_repository/vocoder/1/model.py",
            "voxcpm_5956_d834b110", "1048576", "1048576", "5956", "/x/backends/python", "336",
            "vocoder_0_0", "DEFAULT"]
    assert stub_server_pid(stub) == 5956
    assert stub_server_pid(["/usr/bin/python3", "-c", "pass", "a", "b", "5956"]) is None
    assert stub_server_pid(stub[:5]) is None


def test_a_worker_started_after_its_server_died_is_ended_at_once():
    # A stub whose server aborted while the model loaded is init's child by the time its guard
    # starts: guarding the server's PID (gone, never the parent now) ends it.
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    worker = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from voxcpm_triton.serving.orphan_guard import exit_with_server\n"
                               f"exit_with_server({gone.pid}, poll_s=0.05)\ntime.sleep(60)"])
    try:
        assert not still_running([worker.pid], within_s=10)
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.wait()
