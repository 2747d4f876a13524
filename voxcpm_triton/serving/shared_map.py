"""Tmpfs files and folders that every model process of one server shares: created by whichever
process opens them first (the back-pressure counters, the decoded-window and cancel boards, the
voices), and removed by the last one to let go, so that a server stopped cleanly leaves nothing in
/dev/shm.

A process holding such a path keeps a claim file beside it (the path's name, a dot, a unique
suffix), made before it opens the path and removed when it lets go; whoever then finds no claim left
removes the path. A process that opens the path while the last holder lets go either has its claim
seen (the path stays) or opens a fresh path after the removal. A killed server's claims and paths
carry its PID in their names, and the next start removes those of dead PIDs
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


def claim(path: Path) -> Path:
    """A claim on `path` for this holder (call before opening `path`)."""
    descriptor, name = tempfile.mkstemp(prefix=f"{path.name}.", dir=path.parent)
    os.close(descriptor)
    return Path(name)


def release(path: Path, held: Path) -> None:
    """Drops the claim `held`; if no other claim on `path` is left, removes `path` (a file, or a
    folder with what it holds)."""
    held.unlink(missing_ok=True)
    if any(path.parent.glob(f"{glob.escape(path.name)}.*")):
        return
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
