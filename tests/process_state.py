"""What /proc says of a process: the tests that kill servers and their parents check what is left."""

from __future__ import annotations

import os


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
