"""Slots: a fixed pool of stream places, each with its own rows of a preallocated KV cache."""

from __future__ import annotations

import torch

from voxcpm_triton.config import LMConfig


class SlotPool:
    """Hands out slot indices [0, max_slots); lowest free index first so batches stay compact."""

    def __init__(self, max_slots: int):
        if max_slots < 1:
            raise ValueError(f"max_slots must be >= 1, got {max_slots}")
        self.max_slots = max_slots
        self._free = list(range(max_slots))

    @property
    def free(self) -> int:
        return len(self._free)

    def allocate(self) -> int:
        if not self._free:
            raise RuntimeError("no free slot")
        self._free.sort()
        return self._free.pop(0)

    def release(self, slot: int) -> None:
        if not 0 <= slot < self.max_slots or slot in self._free:
            raise ValueError(f"slot {slot} is not allocated")
        self._free.append(slot)


class KVCache:
    """Keys and values of one LM stack for every slot: [layers, slots + 1, kv_heads, max_context, head_dim].

    A slot's rows [0, length) are live; the rest is stale and never read (attention masks by length).
    The extra last slot is scratch: padding rows of a CUDA-graph batch bucket write and read it, so
    they never touch a stream's rows.
    """

    def __init__(self, config: LMConfig, max_slots: int, max_context: int, device: torch.device,
                 dtype: torch.dtype):
        shape = (config.num_hidden_layers, max_slots + 1, config.num_key_value_heads, max_context, config.head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)

    def write_prompt(self, slot: int, kv: list[tuple[torch.Tensor, torch.Tensor]], row: int, length: int) -> None:
        """Store rows [0, length) of batch row `row` of a prefill's per-layer (k, v) [B, Hkv, T, d]."""
        for layer, (k, v) in enumerate(kv):
            self.k[layer, slot, :, :length] = k[row, :, :length]
            self.v[layer, slot, :, :length] = v[row, :, :length]

    @property
    def pair(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.k, self.v
