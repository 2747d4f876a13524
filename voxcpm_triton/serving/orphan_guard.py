"""Ends a model's stub process once its tritonserver is gone.

Triton's Python backend runs every model instance in a stub process, and a stub whose server has
died (killed, crashed) is meant to notice and exit on its own. On this machine, after a SIGKILL of
tritonserver during a stream, the text_encoder stubs exited within a second, but the ar_decoder's
(and at times the vocoder's) stayed alive indefinitely, every thread waiting on a futex. These two
are the models with threads or calls of their own in flight when the server goes. (On the H200, in
one try with a tiny checkpoint, every stub exited by itself; perf/RESULTS.md run 57.) On a GPU such
an orphan would keep its memory (tens of GB for the decoder) from the restarted server. So each of
them starts this guard: a daemon thread that ends the process outright as soon as the stub's parent
is no longer the server that started it. It does no clean-up: the next server start removes what a
dead server left in /dev/shm.
"""

from __future__ import annotations

import os
import threading
import time

POLL_S = 0.5


def exit_with_server(server_pid: int, poll_s: float = POLL_S) -> threading.Thread:
    """Start the guard for the server `server_pid` (the stub's parent when the model loads)."""

    def run() -> None:
        while os.getppid() == server_pid:
            time.sleep(poll_s)
        os._exit(1)

    thread = threading.Thread(target=run, name="voxcpm-orphan-guard", daemon=True)
    thread.start()
    return thread
