"""Tmpfs files and folders that every model process of one server shares: created by whichever
process opens them first (the back-pressure counters, the decoded-window and cancel boards, the
voices), and removed by the last one to let go, so that a server stopped cleanly leaves nothing in
/dev/shm.

A process holding such a path keeps a claim file beside it (the path's name, a dot, a unique
suffix, the holder's PID inside), made before it opens the path and removed when it lets go; whoever
then finds no claim of a live process left removes the path. A process that opens the path while the
last holder lets go either has its claim seen (the path stays) or opens a fresh path after the
removal. A model process killed alone (Triton 2.51 does not restart it) leaves its claim behind: the
others remove it as they let go, so its claim does not keep the path. A killed server's claims and
paths carry its PID in their names, and the next start removes those of dead PIDs
(build/tritonserver.sh)."""

from __future__ import annotations

import glob
import mmap
import os
import shutil
import tempfile
from pathlib import Path


def map_shared(path: Path, size: int) -> mmap.mmap:
    """`size` bytes of `path` mapped read-write; bytes no process wrote read as zero."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if os.fstat(descriptor).st_size < size:
            os.ftruncate(descriptor, size)  # zero-filled; racing creators truncate to the same size
        return mmap.mmap(descriptor, size)
    finally:
        os.close(descriptor)


def process_alive(pid: int) -> bool:
    """Whether process `pid` still runs. A killed model process stays a zombie until Triton exits, so
    a signal's delivery is no test; /proc's state is. Unknown (0) counts as alive."""
    if pid <= 0:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except FileNotFoundError:
        return not os.path.isdir("/proc/self")  # without /proc nothing can be told
    except OSError:
        return True
    return stat[stat.rindex(b")") + 2:][:1] not in (b"Z", b"X")


def write_claim(descriptor: int) -> None:
    """The holder's PID into its open claim file, for the others' `release`."""
    os.write(descriptor, str(os.getpid()).encode())


def claim(path: Path) -> Path:
    """A claim on `path` for this holder (call before opening `path`)."""
    descriptor, name = tempfile.mkstemp(prefix=f"{path.name}.", dir=path.parent)
    try:
        write_claim(descriptor)
    finally:
        os.close(descriptor)
    return Path(name)


def _held(claim_path: Path) -> bool:
    """Whether `claim_path` is a live process's claim (one still being written counts as live)."""
    try:
        text = claim_path.read_text()
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return not text.isdigit() or process_alive(int(text))


def release(path: Path, held: Path) -> None:
    """Drops the claim `held`; if no claim of a live process on `path` is left, removes `path` (a
    file, or a folder with what it holds) and the dead processes' claims."""
    held.unlink(missing_ok=True)
    others = list(path.parent.glob(f"{glob.escape(path.name)}.*"))
    if any(_held(other) for other in others):
        return
    for other in others:
        other.unlink(missing_ok=True)
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
