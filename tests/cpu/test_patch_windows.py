"""PatchWindows: each slot's window is its last `size` patches (context first), oldest first, and a
window handed out stays as it was while later steps reuse the ring."""

from __future__ import annotations

import numpy as np
import pytest

from voxcpm_triton.engine.patch_windows import PatchWindows


def expected(history: list[np.ndarray], size: int) -> np.ndarray:
    return np.stack(history[-size:])


@pytest.mark.parametrize("size", [1, 2, 5])
def test_windows_follow_each_slots_history(size):
    rng = np.random.default_rng(size)
    windows = PatchWindows(slots=4, size=size)
    contexts = {0: 0, 1: 1, 2: size + 3, 3: 2}  # context patches per slot: none, fewer, more than fit
    history = {}
    for slot, count in contexts.items():
        context = rng.standard_normal((count, 2, 3)).astype(np.float32)
        windows.start(slot, context)
        history[slot] = list(context)
    handed_out = []
    for step in range(3 * size + 2):
        slots = np.array([3, 0, 2] if step % 2 else [0, 1, 2, 3])  # a batch's row order is not slot order
        patches = rng.standard_normal((len(slots), 2, 3)).astype(np.float32)
        got = windows.push(slots, patches)
        for slot, patch, window in zip(slots.tolist(), patches, got):
            history[slot].append(patch)
            want = expected(history[slot], size)
            np.testing.assert_array_equal(window, want)
            handed_out.append((window, want.copy()))
    for window, want in handed_out:  # later pushes never wrote into an earlier step's windows
        np.testing.assert_array_equal(window, want)


def test_a_reused_slot_starts_from_its_new_context():
    windows = PatchWindows(slots=1, size=3)
    windows.start(0, np.zeros((0, 1, 1), np.float32))
    for value in (1.0, 2.0, 3.0, 4.0):
        windows.push(np.array([0]), np.full((1, 1, 1), value, np.float32))
    windows.start(0, np.full((1, 1, 1), 9.0, np.float32))
    (window,) = windows.push(np.array([0]), np.full((1, 1, 1), 5.0, np.float32))
    assert window.ravel().tolist() == [9.0, 5.0]


def test_size_must_be_positive():
    with pytest.raises(ValueError, match="window size"):
        PatchWindows(slots=1, size=0)
