"""Finite scalar quantisation bottleneck between the base LM and the residual LM."""

from __future__ import annotations

import torch
import torch.nn as nn


class ScalarQuantization(nn.Module):
    """Project down, squash with tanh, round to `scale` steps per unit, project back up."""

    def __init__(self, hidden_size: int, latent_dim: int, scale: int):
        super().__init__()
        self.in_proj = nn.Linear(hidden_size, latent_dim)
        self.out_proj = nn.Linear(latent_dim, hidden_size)
        self.scale = scale

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        latent = torch.tanh(self.in_proj(hidden))
        return self.out_proj(torch.round(latent * self.scale) / self.scale)
