"""SwiGLU over a fused gate_up projection output: CUDA op and PyTorch reference.

The fused projection's weight is torch.cat([gate_proj.weight, up_proj.weight]), so its output holds
gate in the first half of the last dimension and up in the second.

`norm_input` serves a layer whose post-attention RMSNorm weight is folded into its gate_up weight
(fast_path.enable_folded_statistics: the LMs' decode, LocEnc, the LocDiT below 1024 rows): the GEMM
then read the un-normed residual rows, and each row's gate and up still need that norm's statistic,
which the op computes from the rows given and applies before SwiGLU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from voxcpm_triton.ops import library as lib
from voxcpm_triton.ops.row_scale import check_norm_input, row_scale_ref


def swiglu_ref(gate_up: torch.Tensor, norm_input: torch.Tensor | None = None, norm_eps: float = 1e-6) -> torch.Tensor:
    gate, up = gate_up.chunk(2, dim=-1)
    if norm_input is not None:
        scale = row_scale_ref(norm_input, norm_eps).unsqueeze(-1)
        gate, up = (gate.float() * scale).to(gate.dtype), (up.float() * scale).to(up.dtype)
    return F.silu(gate) * up


@torch.library.custom_op("voxcpm::swiglu", mutates_args=(),
                         schema="(Tensor gate_up, Tensor? norm_input, float norm_eps) -> Tensor")
def _swiglu_op(gate_up: torch.Tensor, norm_input: torch.Tensor | None, norm_eps: float) -> torch.Tensor:
    if not lib.kernel_ready(gate_up):
        return swiglu_ref(gate_up, norm_input, norm_eps)
    inter = gate_up.shape[-1] // 2
    out = gate_up.new_empty((*gate_up.shape[:-1], inter))
    with lib.device_of(gate_up):
        error = lib.library().voxcpm_swiglu(lib.ptr(gate_up), lib.ptr(norm_input),
                                            0 if norm_input is None else norm_input.shape[-1], norm_eps, lib.ptr(out),
                                            gate_up.numel() // (2 * inter), inter, lib.dtype_code(gate_up),
                                            lib.stream_of(gate_up))
    lib.check(error, "swiglu")
    return out


@_swiglu_op.register_fake
def _(gate_up: torch.Tensor, norm_input: torch.Tensor | None, norm_eps: float) -> torch.Tensor:
    return gate_up.new_empty((*gate_up.shape[:-1], gate_up.shape[-1] // 2))


def swiglu(gate_up: torch.Tensor, norm_input: torch.Tensor | None = None, norm_eps: float = 1e-6) -> torch.Tensor:
    """silu(gate) * up for gate_up = [..., 2 * inter] (gate first); returns [..., inter]. With
    norm_input [..., hidden] (gate_up's leading shape, contiguous, its dtype and device), gate and up
    are first scaled by 1 / sqrt(mean(norm_input^2) + norm_eps) per row and rounded to their dtype."""
    lib.require(gate_up.dim() >= 1 and gate_up.shape[-1] % 2 == 0 and gate_up.shape[-1] > 0,
                f"gate_up's last dimension must be even and > 0, got shape {tuple(gate_up.shape)}")
    lib.require(gate_up.is_contiguous(), f"gate_up must be contiguous, got strides {gate_up.stride()}")
    if norm_input is not None:
        check_norm_input(norm_input, gate_up.shape[:-1], gate_up)
        rows = gate_up.numel() // gate_up.shape[-1]
        lib.require(rows <= 65535, f"swiglu with a norm_input takes at most 65535 rows, got {rows}")
        lib.require(norm_eps > 0.0, f"norm_eps must be > 0, got {norm_eps}")
    return torch.ops.voxcpm.swiglu(gate_up, norm_input, float(norm_eps))
