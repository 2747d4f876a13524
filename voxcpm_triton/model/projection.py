"""The model's linear layers with a bias (projections between the stacks, the LocDiT's in / out and
time MLPs, FSQ): nn.Linear, which goes through ops.linear once the custom ops are enabled.

At one or a few streams these have 1 to 32 rows; on cuBLAS each is a kernel that breaks the chain
of programmatic dependent launches the skinny_gemm kernels around it form, while ops.linear runs
them on skinny_gemm with the bias in its epilogue. Parameters and state_dict keys are nn.Linear's.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from voxcpm_triton import ops


class Projection(nn.Linear):
    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        super().__init__(in_features, out_features, bias=bias)
        self.use_op = False  # fast_path.enable_custom_ops

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_op:
            return ops.linear(x, self.weight, self.bias)
        return F.linear(x, self.weight, self.bias)
