"""A MiniCPM layer's SwiGLU MLP: plain PyTorch, or the fused gate_up weight on the custom ops (FP8
at many rows when enabled, the Hopper gate_up kernel, the norm inside the GEMM and the residual add
inside down_proj's)."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from voxcpm_triton import ops
from voxcpm_triton.config import LMConfig
from voxcpm_triton.model.rms_norm import RMSNorm
from voxcpm_triton.ops import gate_up_sm90
from voxcpm_triton.ops.fp8_linear import SWIGLU, Fp8Weight, fp8_linear, fp8_takes


class MLP(nn.Module):
    def __init__(self, config: LMConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        # [gate; up] weight whose halves gate_proj/up_proj view (fast_path.fuse_weights): one
        # GEMM and the swiglu op instead of two GEMMs and three elementwise kernels.
        self.gate_up_weight: torch.Tensor | None = None
        # FP8 copies of the fused gate_up and of down_proj (fast_path.enable_fp8), used at many rows.
        self.fp8_gate_up: Fp8Weight | None = None
        self.fp8_down: Fp8Weight | None = None
        # gate_up_weight interleaved for the Hopper kernel with SwiGLU in its epilogue
        # (fast_path.enable_sm90_gate_up), used at many rows.
        self.gate_up_interleaved: torch.Tensor | None = None
        # The same times the post-attention norm's weight along k (fast_path.enable_folded_norms).
        self.folded_gate_up: torch.Tensor | None = None
        # gate_up_weight (not interleaved) times the post-attention norm's weight along k, for the
        # GEMM + swiglu(norm_input) path (fast_path.enable_folded_statistics): the LMs' decode, LocEnc
        # and the LocDiT below the Hopper path's 1024 rows, each at more rows than skinny_gemm takes.
        self.folded_plain_gate_up: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_up_weight is not None and fp8_takes(x, self.fp8_gate_up) and fp8_takes(x, self.fp8_down):
            # SwiGLU folds into the quantisation of the down projection's input.
            return fp8_linear(fp8_linear(x, self.fp8_gate_up), self.fp8_down, SWIGLU)
        if self.gate_up_weight is not None:
            return ops.linear(ops.gate_up_swiglu(x, self.gate_up_weight, self.gate_up_interleaved),
                              self.down_proj.weight)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    def add_normed_(self, x: torch.Tensor, norm: RMSNorm, scale: float) -> torch.Tensor:
        """x += scale * mlp(norm(x)) in place for a few rows (custom ops): the norm inside the
        gate_up GEMM, the add inside down_proj's."""
        hidden = ops.normed_gate_up_swiglu(x, self.gate_up_weight, norm.weight, norm.eps)
        return ops.linear_residual_(hidden, self.down_proj.weight, x, scale)

    def add_folded_plain_(self, x: torch.Tensor, norm: RMSNorm, scale: float) -> torch.Tensor:
        """add_normed_ for rows x [N, hidden] (contiguous) with the norm's weight folded into
        folded_plain_gate_up: the GEMM reads x itself, swiglu computes the norm's row statistic
        from x and applies it, and the add runs in down_proj's epilogue."""
        hidden = ops.swiglu(ops.linear(x, self.folded_plain_gate_up), x, norm.eps)
        return ops.linear_residual_(hidden, self.down_proj.weight, x, scale)

    def add_folded_(self, x: torch.Tensor, norm: RMSNorm, scale: float) -> torch.Tensor:
        """add_normed_ for many rows with the norm's weight folded into folded_gate_up: the Hopper
        gate_up kernel applies the norm's row statistic in its epilogue."""
        flat = x.view(-1, x.shape[-1])
        hidden = gate_up_sm90.scaled(flat, self.folded_gate_up, ops.row_scale(flat, norm.eps))
        return ops.linear_residual_(hidden, self.down_proj.weight, flat, scale).view(x.shape)
