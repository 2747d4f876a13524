"""LocEnc: turns each latent patch [P, D] into one LM-width vector via a learned CLS token."""

from __future__ import annotations

import torch
import torch.nn as nn

from voxcpm_triton.config import LMConfig
from voxcpm_triton.model.minicpm import MiniCPMModel
from voxcpm_triton.model.projection import Projection


class LocalEncoder(nn.Module):
    def __init__(self, config: LMConfig, feat_dim: int, patch_size: int):
        super().__init__()
        self.special_token = nn.Parameter(torch.randn(1, 1, 1, config.hidden_size))
        self.in_proj = Projection(feat_dim, config.hidden_size, bias=True)
        self.encoder = MiniCPMModel(config, max_positions=patch_size + 1)

    def forward(self, patches: torch.Tensor) -> torch.Tensor:
        """patches [B, T, P, D] -> [B, T, hidden] (bidirectional attention inside each patch)."""
        batch, steps, patch, _ = patches.shape
        x = self.in_proj(patches)
        cls = self.special_token.expand(batch, steps, 1, -1)
        x = torch.cat((cls, x), dim=2).reshape(batch * steps, patch + 1, -1)
        # Only the CLS position is read: the last layer computes that row alone.
        hidden, _ = self.encoder(x, causal=False, rows=slice(0, 1))
        return hidden[:, 0].reshape(batch, steps, -1)
