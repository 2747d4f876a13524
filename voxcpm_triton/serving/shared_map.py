"""A tmpfs file that every model process of one server maps, created zero-filled by whichever
process opens it first (the back-pressure counters, the decoded-window board)."""

from __future__ import annotations

import mmap
import os
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
