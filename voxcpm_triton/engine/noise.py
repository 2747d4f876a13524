"""Per-slot ring of pre-drawn noise patches for the CUDA step.

Each stream keeps its own generator (so batch composition never changes its noise), but B tiny
randn launches per step cost more than the step itself at large B. So every `block` steps a stream
draws its next `block` patches in one call into its row of the ring [slots + 1, block, D, P]
(outside any CUDA graph), and the step reads row `produced % block` on the device. Patches are
drawn as [D, P] like the reference and read transposed. The last slot is the padding rows' scratch.
"""

from __future__ import annotations

import os

import numpy as np
import torch

DEFAULT_BLOCK = 32


def block_from_env() -> int:
    block = int(os.environ.get("VOXCPM_NOISE_BLOCK", DEFAULT_BLOCK))
    if block < 1:
        raise ValueError(f"VOXCPM_NOISE_BLOCK must be >= 1, got {block}")
    return block


class NoiseRing:
    def __init__(self, max_slots: int, patch_size: int, feat_dim: int, block: int, device: torch.device,
                 dtype: torch.dtype):
        if block < 1:
            raise ValueError(f"noise block must be >= 1, got {block}")
        self.block = block
        self.ring = torch.zeros(max_slots + 1, block, feat_dim, patch_size, device=device, dtype=dtype)

    def rows(self, slots: np.ndarray, launched: np.ndarray, generators: list[torch.Generator | None]) -> np.ndarray:
        """Ring row of each stream's next step, [B] (streams in slots[i] with launched[i] steps
        queued so far); a stream starting a new block first draws it from generators[slot]."""
        rows = launched % self.block
        for i in np.flatnonzero(rows == 0).tolist():
            slot = int(slots[i])
            self.ring[slot].normal_(generator=generators[slot])
        return rows
