"""Python's cyclic garbage collector held off while a CUDA graph is captured.

Why: an engine, a graph cache or a test that dropped its CUDA graphs in a reference cycle frees
them only when the collector next runs. If that happens while another graph is being captured, the
graph's destructor calls cudaGraphExecDestroy, which the driver refuses during a global-mode
capture, and the capture is invalidated (pytorch/pytorch#161037; torch no longer collects before a
capture on its own). Collecting first and pausing automatic collection until the capture ends
makes that impossible. Captures may overlap across threads (engine and vocoder in one process),
so the pause is counted: the last capture out restores the collector's earlier state.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_holders = 0
_was_enabled = True


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Collects now, then keeps automatic collection off until the block (and any overlapping one
    in another thread) ends."""
    global _holders, _was_enabled
    gc.collect()
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                gc.enable()
