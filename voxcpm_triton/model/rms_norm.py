"""RMSNorm as the reference computes it: the statistic in float32, the product back in the input's
dtype times the weight."""

from __future__ import annotations

import torch
import torch.nn as nn


def rms_norm(hidden: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    variance = hidden.to(torch.float32).pow(2).mean(dim=-1, keepdim=True)
    return (hidden * torch.rsqrt(variance + eps)).to(hidden.dtype) * weight


class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return rms_norm(hidden, self.weight, self.eps)
