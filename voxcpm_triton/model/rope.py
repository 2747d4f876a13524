"""LongRoPE rotary tables and the rotate-half rotation (in float32, as the reference)."""

from __future__ import annotations

import math

import torch
import torch.nn as nn

from voxcpm_triton.config import LMConfig


class LongRoPE(nn.Module):
    """Rotary tables with LongRoPE frequency divisors and attention scaling.

    The reference picks the long or short divisors once, from max_position_embeddings, so every
    position uses the same set; tables are built for `max_positions` rows only (entries do not
    depend on the table length).
    """

    def __init__(self, config: LMConfig, max_positions: int):
        super().__init__()
        dim = config.head_dim
        scaling = config.rope_scaling
        original = scaling.original_max_position_embeddings
        scale = config.max_position_embeddings / original
        attention_factor = math.sqrt(1 + math.log(scale) / math.log(original))
        divisors = scaling.long_factor if config.max_position_embeddings > original else scaling.short_factor
        inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2).float() / dim))
        positions = torch.arange(max_positions, dtype=torch.float32)
        freqs = torch.outer(positions, 1.0 / torch.tensor(divisors, dtype=torch.float32)) * inv_freq
        angles = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_table", angles.cos() * attention_factor, persistent=False)
        self.register_buffer("sin_table", angles.sin() * attention_factor, persistent=False)

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.cos_table[positions], self.sin_table[positions]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate `x` [..., head_dim] by tables broadcastable to it; math in float32."""
    x32 = x.to(torch.float32)
    first, second = x32.chunk(2, dim=-1)
    rotated = torch.cat((-second, first), dim=-1)
    return (x32 * cos + rotated * sin).to(x.dtype)
