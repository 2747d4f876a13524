"""Finite scalar quantisation bottleneck between the base LM and the residual LM."""

from __future__ import annotations

import torch
import torch.nn as nn

from voxcpm_triton import ops
from voxcpm_triton.model.projection import Projection


class ScalarQuantization(nn.Module):
    """Project down, squash with tanh, round to `scale` steps per unit, project back up."""

    def __init__(self, hidden_size: int, latent_dim: int, scale: int):
        super().__init__()
        self.in_proj = Projection(hidden_size, latent_dim)
        self.out_proj = Projection(latent_dim, hidden_size)
        self.scale = scale
        self.use_op = False  # fast_path.enable_custom_ops: tanh/round/scale as one fsq op

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        if self.use_op:
            return self.out_proj(ops.fsq(self.in_proj(hidden), float(self.scale)))
        latent = torch.tanh(self.in_proj(hidden))
        return self.out_proj(torch.round(latent * self.scale) / self.scale)
