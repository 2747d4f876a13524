"""LocDiT: the flow-matching velocity estimator for one latent patch.

The sequence fed to its bidirectional transformer is [conditioning tokens, previous patch, noisy
patch]; the velocity is read from the noisy patch's positions. Version 1 (VoxCPM1.x) folds the LM
conditioning into the time token; version 2 (VoxCPM2) gives it `mu_tokens` positions of its own
(the base-LM and residual-LM projections) before the time token.
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from voxcpm_triton import ops
from voxcpm_triton.config import LMConfig
from voxcpm_triton.model.minicpm import MiniCPMModel
from voxcpm_triton.model.projection import Projection


def timestep_embedding(t: torch.Tensor, dim: int, scale: float = 1000.0) -> torch.Tensor:
    """Sinusoidal embedding [N, dim] of t [N], computed in t's dtype like the reference."""
    half = dim // 2
    exponent = math.log(10000) / (half - 1)
    freqs = torch.exp(torch.arange(half, dtype=t.dtype, device=t.device) * -exponent)
    angles = scale * t.unsqueeze(1) * freqs.unsqueeze(0)
    return torch.cat((angles.sin(), angles.cos()), dim=-1)


class TimestepMLP(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear_1 = Projection(hidden_size, hidden_size, bias=True)
        self.linear_2 = Projection(hidden_size, hidden_size, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(F.silu(self.linear_1(x)))


class LocalDiT(nn.Module):
    def __init__(self, config: LMConfig, feat_dim: int, patch_size: int, version: int):
        super().__init__()
        if version not in (1, 2):
            raise ValueError(f"LocDiT version must be 1 or 2, got {version}")
        self.version = version
        self.hidden_size = config.hidden_size
        self.in_proj = Projection(feat_dim, config.hidden_size, bias=True)
        self.cond_proj = Projection(feat_dim, config.hidden_size, bias=True)
        self.out_proj = Projection(config.hidden_size, feat_dim, bias=True)
        self.time_mlp = TimestepMLP(config.hidden_size)
        self.delta_time_mlp = TimestepMLP(config.hidden_size)
        mu_tokens = 2 if version == 2 else 0
        self.decoder = MiniCPMModel(config, max_positions=mu_tokens + 1 + 2 * patch_size)

    def time_token(self, t: torch.Tensor, dt: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """Embedding [N, hidden] of diffusion time t and step size dt (both [N])."""
        t_embed = self.time_mlp(timestep_embedding(t, self.hidden_size).to(dtype))
        return t_embed + self.delta_time_mlp(timestep_embedding(dt, self.hidden_size).to(dtype))

    def forward(self, x: torch.Tensor, mu: torch.Tensor, t: torch.Tensor, cond: torch.Tensor,
                dt: torch.Tensor) -> torch.Tensor:
        """x [N, P, D] noisy patch, mu [N, mu_width], t/dt [N], cond [N, Pc, D] -> velocity [N, P, D]."""
        x = self.in_proj(x)
        time = self.time_token(t, dt, mu.dtype)
        if self.version == 1:
            prefix = (mu + time).unsqueeze(1)
        else:
            prefix = torch.cat((mu.view(x.shape[0], -1, x.shape[-1]), time.unsqueeze(1)), dim=1)
        return self._velocity(torch.cat((prefix, self.cond_proj(cond), x), dim=1), x.shape[1])

    def guided_velocity(self, x: torch.Tensor, mu_pair: torch.Tensor, time: torch.Tensor,
                        cond: torch.Tensor) -> torch.Tensor:
        """Velocity of both guidance branches, [2N, P, D] (mu_pair[0]'s rows first), for the Euler
        loop: x [N, P, D] noisy patch and cond [N, Pc, hidden] projected condition are shared by the
        branches, mu_pair [2, N, mu_width] is not, time [hidden] is this step's token for every row.

        The patch is projected once for both branches, and one pass builds the whole [2N, L,
        hidden] input: the locdit_sequence op for VoxCPM2's layout, a concatenation of broadcast
        views for version 1's (mu plus time as one token)."""
        x = self.in_proj(x)
        if self.version == 2:
            return self._velocity(ops.locdit_sequence(mu_pair, time, cond, x), x.shape[1])
        batch, hidden = x.shape[0], x.shape[-1]
        time = time.view(1, 1, 1, hidden).expand(2, batch, 1, hidden)
        shared = tuple(part.unsqueeze(0).expand(2, *part.shape) for part in (cond, x))
        sequence = torch.cat((mu_pair.unsqueeze(2) + time,) + shared, dim=2).view(2 * batch, -1, hidden)
        return self._velocity(sequence, x.shape[1])

    def _velocity(self, sequence: torch.Tensor, patch: int) -> torch.Tensor:
        """Transformer over [B, L, hidden] sequences ending with the noisy patch's `patch`
        positions -> velocity [B, patch, D]. Only those positions are read: the last layer computes
        those rows alone. The sequence is a fresh tensor, so the stack may update it in place."""
        noisy = slice(sequence.shape[1] - patch, None)
        hidden, _ = self.decoder(sequence, causal=False, rows=noisy, owned=True)
        return self.out_proj(hidden)
