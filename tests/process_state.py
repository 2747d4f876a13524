"""What /proc says of a process: the tests that kill servers and their parents check what is left."""

from __future__ import annotations

import os
import time


def _stat_fields(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    except OSError:
        return None


def running(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def children(pid: int) -> list[int]:
    return [int(entry) for entry in os.listdir("/proc")
            if entry.isdigit() and (fields := _stat_fields(int(entry))) is not None and int(fields[1]) == pid]


def still_running(pids: list[int], within_s: float, poll_s: float = 0.05) -> list[int]:
    """Those of `pids` still running after waiting up to `within_s` for all of them to end."""
    deadline = time.monotonic() + within_s
    while any(running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(poll_s)
    return [pid for pid in pids if running(pid)]
