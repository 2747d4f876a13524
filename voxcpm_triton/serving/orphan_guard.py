"""Ends a model's stub process once its tritonserver is gone.

Triton's Python backend runs every model instance in a stub process, and a stub whose server has
died (killed, crashed) is meant to notice and exit on its own. On this machine, after a SIGKILL of
tritonserver during a stream, the text_encoder stubs exited within a second, but the ar_decoder's
(and at times the vocoder's) stayed alive indefinitely, every thread waiting on a futex. These two
are the models with threads or calls of their own in flight when the server goes. (On the H200, in
one try with a tiny checkpoint, every stub exited by itself; perf/RESULTS.md run 57.) On a GPU such
an orphan would keep its memory (tens of GB for the decoder) from the restarted server.

So each model starts this guard when it loads: a small shell process. It SIGKILLs the stub as
soon as the stub's parent is no longer the server that started it, and exits by itself once the
stub is gone. Until stop 26 the guard was a daemon thread in the stub. A thread needs the GIL, so a
stub thread blocked in a call that keeps the GIL would starve it
(tests/cpu/test_orphan_guard.py holds the GIL that way). In one CI run of stop 26 a stub outlived
its killed server by more than 10 s; which stub, and why, was not found. A process needs nothing
from the stub. The guard does no clean-up: the next server start removes what a dead server left
in /dev/shm.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

POLL_S = 0.5
STUB_PROGRAM = "triton_python_backend_stub"

# $1 stub pid, $2 server pid, $3 poll seconds. The fields of /proc/<pid>/stat after the command
# name: 2 is the parent, 20 the start time, which tells the stub from a later process that reuses
# its pid.
_WATCH = """
fields() { { read -r line < "/proc/$1/stat"; } 2>/dev/null || return 1; rest=${line##*')'}; }
fields "$1" || exit 0
set -- "$1" "$2" "$3" $rest
start=${23}
while :; do
  fields "$1" || exit 0
  set -- "$1" "$2" "$3" $rest
  [ "${23}" = "$start" ] || exit 0
  if [ "$5" != "$2" ]; then kill -9 "$1" 2>/dev/null; exit 0; fi
  sleep "$3"
done
"""


def exit_with_server(server_pid: int, poll_s: float = POLL_S) -> subprocess.Popen:
    """Start the guard of this process against the death of the server `server_pid` (the stub's
    parent when the model loads)."""
    return subprocess.Popen(["/bin/sh", "-c", _WATCH, "orphan-guard", str(os.getpid()), str(server_pid), str(poll_s)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            close_fds=True)


def stub_server_pid(argv: list[str]) -> int | None:
    """The server's PID on a Python-backend stub's command line (Triton 2.51: the program, the
    model's file, the shared memory region, its two sizes, then the server's PID), or None for any
    other command line."""
    if len(argv) > 5 and Path(argv[0]).name == STUB_PROGRAM and argv[5].isdigit():
        return int(argv[5])
    return None


def server_pid() -> int:
    """The PID of the tritonserver that started this stub process. The parent's PID alone is wrong
    when the server died while the model loaded: the stub is then init's child (1). Its guard
    would watch the wrong process and the shared boards named after it would never be removed. In
    one CI run a server aborted during start-up (boost's lock_exception in Triton's backend); it
    left two stubs running and /dev/shm/voxcpm-acks-1 behind."""
    argv = Path("/proc/self/cmdline").read_bytes().decode(errors="replace").split("\0")
    return stub_server_pid(argv) or os.getppid()
