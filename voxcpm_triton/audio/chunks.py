"""How many new patches each vocoder window of a stream carries.

A window holds the left context the causal decoder reads plus the patches whose samples it returns.
The context costs the same whatever the number of new patches (~44% of a one-patch window's work on
the full-size AudioVAE, perf/RESULTS.md run 33), so a window carrying k patches costs less per
patch, and the vocoder gets k times fewer requests. A stream's first window carries one patch, so
its first audio is not delayed; then the count doubles up to `max_new` (1, 2, 4, 4, ...). Doubling
keeps playback fed: a chunk of k patches takes k decoder steps to produce while the ~k patches
already sent play, so any step shorter than half a patch's duration (RTF < 0.5) never starves the
listener. The stream's last window carries whatever is left (1..max_new).
"""

from __future__ import annotations

from collections import deque

import numpy as np

DEFAULT_MAX_NEW = 4


def _check_counts(window_patches: int, max_new: int) -> None:
    if window_patches < 1 or max_new < 1:
        raise ValueError(f"window_patches={window_patches}, max_new={max_new}; both must be >= 1")


def chunk_patches(chunks_sent: int, max_new: int) -> int:
    """New patches in a stream's next window after `chunks_sent` windows (the last may hold fewer)."""
    return min(1 << min(chunks_sent, 16), max_new)


def window_shapes(window_patches: int, max_new: int) -> list[tuple[int, int]]:
    """The (window length, new patches) pairs of the windows PatchChunker makes for streams with no
    prompt context or a full one (window_patches - 1 patches: ~0.8 s of prompt audio), but for
    the last window of a stream that ends while the count still grows: one-patch windows at every
    context length, the doubling windows of a stream with no context, and every count at full
    context. The vocoder captures CUDA graphs for these; other shapes decode eagerly."""
    _check_counts(window_patches, max_new)
    shapes = {(length, 1) for length in range(1, window_patches + 1)}
    shapes.update((window_patches - 1 + new, new) for new in range(1, max_new + 1))
    produced, sent = 0, 0
    while produced < window_patches - 1:
        new = chunk_patches(sent, max_new)
        shapes.add((produced + new, new))
        produced, sent = produced + new, sent + 1
    return sorted(shapes)


class PatchChunker:
    """One stream's patches, as the engine emits them, grouped into vocoder windows."""

    def __init__(self, window_patches: int, max_new: int) -> None:
        _check_counts(window_patches, max_new)
        self.window_patches = window_patches
        self.max_new = max_new
        self._history: deque[np.ndarray] = deque(maxlen=window_patches - 1 + max_new)
        self._pending = 0
        self._sent = 0

    def add(self, window: np.ndarray) -> None:
        """Take the engine's window of this step: [n, P, D], its new patch last. The first one
        also brings the prompt's context patches."""
        if self._sent == 0 and self._pending == 0:
            self._history.extend(window)
        else:
            self._history.append(window[-1])
        self._pending += 1

    def take(self, final: bool) -> tuple[np.ndarray, int] | None:
        """(window [context + k, P, D], k) once k = chunk_patches new patches are waiting, or
        with `final` whatever is waiting; None otherwise."""
        if self._pending == 0 or (not final and self._pending < chunk_patches(self._sent, self.max_new)):
            return None
        new = self._pending
        length = min(len(self._history), self.window_patches - 1 + new)
        window = np.stack(list(self._history)[-length:])
        self._pending = 0
        self._sent += 1
        return window, new

    def feed(self, window: np.ndarray | None, finished: bool) -> tuple[np.ndarray, int] | None:
        """One engine output of this stream: its window (None or empty when it brought no patch)
        and whether the stream ended; returns the window to decode now, if any."""
        if window is not None and len(window):
            self.add(window)
        return self.take(final=finished)
