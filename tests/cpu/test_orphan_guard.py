"""exit_with_server ends its process once the parent it was started for is gone, even while the
process's main thread is busy."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from tests.process_state import running

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


def test_worker_ends_when_its_parent_is_killed():
    middle = subprocess.Popen([sys.executable, "-c", MIDDLE, WORKER], stdout=subprocess.PIPE, text=True)
    worker = int(middle.stdout.readline())
    try:
        time.sleep(0.5)
        assert running(worker), "the guard must leave a worker with a live parent alone"
        middle.send_signal(signal.SIGKILL)
        middle.wait()
        deadline = time.monotonic() + 10
        while running(worker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(worker)
    finally:
        if running(worker):
            os.kill(worker, signal.SIGKILL)
