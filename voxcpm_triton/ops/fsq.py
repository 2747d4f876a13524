"""Finite scalar quantisation between the FSQ projections (eval mode): CUDA op and reference."""

from __future__ import annotations

import torch

from voxcpm_triton.ops import library as lib


def fsq_ref(h: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.round(torch.tanh(h) * scale) / scale


@torch.library.custom_op("voxcpm::fsq", mutates_args=(), schema="(Tensor h, float scale) -> Tensor")
def _fsq_op(h: torch.Tensor, scale: float) -> torch.Tensor:
    if not lib.kernel_ready(h):
        return fsq_ref(h, scale)
    out = torch.empty_like(h)
    with lib.device_of(h):
        error = lib.library().voxcpm_fsq(lib.ptr(h), lib.ptr(out), h.numel(), scale, lib.dtype_code(h),
                                         lib.stream_of(h))
    lib.check(error, "fsq")
    return out


@_fsq_op.register_fake
def _(h: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.empty_like(h)


def fsq(h: torch.Tensor, scale: float) -> torch.Tensor:
    """round(tanh(h) * scale) / scale elementwise (round half to even), h = in_proj output."""
    lib.require(scale > 0, f"scale must be > 0, got {scale}")
    lib.require(h.is_contiguous(), f"h must be contiguous, got strides {h.stride()}")
    return torch.ops.voxcpm.fsq(h, float(scale))
