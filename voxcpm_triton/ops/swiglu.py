"""SwiGLU over a fused gate_up projection output: CUDA op and PyTorch reference.

The fused projection's weight is torch.cat([gate_proj.weight, up_proj.weight]), so its output holds
gate in the first half of the last dimension and up in the second.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from voxcpm_triton.ops import library as lib


def swiglu_ref(gate_up: torch.Tensor) -> torch.Tensor:
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


@torch.library.custom_op("voxcpm::swiglu", mutates_args=(), schema="(Tensor gate_up) -> Tensor")
def _swiglu_op(gate_up: torch.Tensor) -> torch.Tensor:
    if not lib.kernel_ready(gate_up):
        return swiglu_ref(gate_up)
    inter = gate_up.shape[-1] // 2
    out = gate_up.new_empty((*gate_up.shape[:-1], inter))
    with lib.device_of(gate_up):
        error = lib.library().voxcpm_swiglu(lib.ptr(gate_up), lib.ptr(out), gate_up.numel() // (2 * inter), inter,
                                            lib.dtype_code(gate_up), lib.stream_of(gate_up))
    lib.check(error, "swiglu")
    return out


@_swiglu_op.register_fake
def _(gate_up: torch.Tensor) -> torch.Tensor:
    return gate_up.new_empty((*gate_up.shape[:-1], gate_up.shape[-1] // 2))


def swiglu(gate_up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up for gate_up = [..., 2 * inter] (gate first); returns [..., inter]."""
    lib.require(gate_up.dim() >= 1 and gate_up.shape[-1] % 2 == 0 and gate_up.shape[-1] > 0,
                f"gate_up's last dimension must be even and > 0, got shape {tuple(gate_up.shape)}")
    lib.require(gate_up.is_contiguous(), f"gate_up must be contiguous, got strides {gate_up.stride()}")
    return torch.ops.voxcpm.swiglu(gate_up)
