"""Each slot's most recent patches, the left context of its next vocoder window, for all slots in
one array.

Every step emits, per stream, its last `size` patches (fewer at first), oldest first. Kept as a deque
per stream and stacked per output, that was most of the host's booking time: ~2 ms a step at 256
streams on a 2-core CPU (perf/host_step.py). Here a step's patches go into a ring per slot with
one scatter, and one gather makes the step's windows, as views of a fresh array.
"""

from __future__ import annotations

import numpy as np


class PatchWindows:
    def __init__(self, slots: int, size: int):
        if size < 1:
            raise ValueError(f"window size must be >= 1, got {size}")
        self.size = size
        self._ring: np.ndarray | None = None  # [slots, size, P, D] float32, made at the first patch shape
        self._slots = slots
        # Patches each slot has had since its stream started; the next goes to ring position
        # count % size.
        self._count = np.zeros(slots, dtype=np.int64)
        # Ring positions oldest first when the newest patch sits at position h: row h.
        self._order = (np.arange(size)[:, None] + 1 + np.arange(size)) % size

    def _storage(self, patch_shape: tuple[int, ...]) -> np.ndarray:
        if self._ring is None or self._ring.shape[2:] != patch_shape:
            self._ring = np.zeros((self._slots, self.size, *patch_shape), dtype=np.float32)
        return self._ring

    def start(self, slot: int, context: np.ndarray) -> None:
        """A new stream in `slot`: its window starts with the last size - 1 of its context
        patches [C, P, D] (the prompt's audio before the first generated patch)."""
        kept = context[max(0, len(context) - (self.size - 1)):]
        self._storage(context.shape[1:])[slot, :len(kept)] = kept
        self._count[slot] = len(kept)

    def push(self, slots: np.ndarray, patches: np.ndarray) -> list[np.ndarray]:
        """Add patches[i] [P, D] to slot slots[i] (distinct slots) and return each slot's window
        [n <= size, P, D], oldest first, as views of one array made for this call."""
        ring = self._storage(patches.shape[1:])
        count = self._count[slots]
        head = count % self.size
        ring[slots, head] = patches
        count += 1
        self._count[slots] = count
        windows = ring[slots[:, None], self._order[head]]
        return [windows[i, self.size - n:] for i, n in enumerate(np.minimum(count, self.size).tolist())]
