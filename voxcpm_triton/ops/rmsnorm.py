"""RMSNorm and fused residual-add + RMSNorm: CUDA op over libvoxcpm_kernels and PyTorch reference.

`add_rmsnorm(x, residual, weight, eps)` updates the residual stream in place (x += residual) and
returns rmsnorm(x) * weight, as a decoder layer needs between attention and MLP; `rmsnorm` is the
plain norm (first layer input, final norm). Both round like MiniCPM's rms_layernorm.
"""

from __future__ import annotations

import torch

from voxcpm_triton.ops import library as lib


def rmsnorm_ref(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    variance = x.float().pow(2).mean(dim=-1, keepdim=True)
    return (x * torch.rsqrt(variance + eps)).to(x.dtype) * weight


def add_rmsnorm_ref(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float, residual_scale: float = 1.0
) -> torch.Tensor:
    x.copy_(x + residual * residual_scale)
    return rmsnorm_ref(x, weight, eps)


def _launch(x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float,
            residual_scale: float) -> torch.Tensor:
    out = torch.empty_like(x)
    hidden = x.shape[-1]
    with lib.device_of(x):
        error = lib.library().voxcpm_add_rmsnorm(
            lib.ptr(x), lib.ptr(residual), lib.ptr(weight), lib.ptr(out), x.numel() // hidden, hidden,
            eps, residual_scale, lib.dtype_code(x), lib.stream_of(x))
    lib.check(error, "rmsnorm")
    return out


@torch.library.custom_op("voxcpm::rmsnorm", mutates_args=(),
                         schema="(Tensor x, Tensor weight, float eps) -> Tensor")
def _rmsnorm_op(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if lib.kernel_ready(x):
        return _launch(x, None, weight, eps, 1.0)
    return rmsnorm_ref(x, weight, eps)


@_rmsnorm_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op(
    "voxcpm::add_rmsnorm", mutates_args=("x",),
    schema="(Tensor(a!) x, Tensor residual, Tensor weight, float eps, float residual_scale) -> Tensor")
def _add_rmsnorm_op(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                    residual_scale: float) -> torch.Tensor:
    if lib.kernel_ready(x):
        return _launch(x, residual, weight, eps, residual_scale)
    return add_rmsnorm_ref(x, residual, weight, eps, residual_scale)


@_add_rmsnorm_op.register_fake
def _(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
      residual_scale: float) -> torch.Tensor:
    return torch.empty_like(x)


def _validate(x: torch.Tensor, weight: torch.Tensor, eps: float) -> None:
    lib.require(x.dim() >= 1 and x.is_contiguous(), f"x must be a contiguous [..., hidden] tensor, got shape "
                f"{tuple(x.shape)} strides {x.stride()}")
    hidden = x.shape[-1]
    lib.require(1 <= hidden <= 16384, f"x hidden size must be in [1, 16384], got {hidden}")
    lib.require(weight.shape == (hidden,) and weight.dtype == x.dtype and weight.device == x.device,
                f"weight must be [{hidden}] of {x.dtype} on {x.device}, got {tuple(weight.shape)} "
                f"{weight.dtype} on {weight.device}")
    lib.require(weight.is_contiguous(), "weight must be contiguous")
    lib.require(eps > 0.0, f"eps must be > 0, got {eps}")


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """rmsnorm(x) * weight over the last dimension; x is left unchanged."""
    _validate(x, weight, eps)
    return torch.ops.voxcpm.rmsnorm(x, weight, eps)


def add_rmsnorm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float,
                residual_scale: float = 1.0) -> torch.Tensor:
    """x += residual * residual_scale (in place, rounded to x's dtype); returns rmsnorm(x) * weight."""
    _validate(x, weight, eps)
    lib.require(residual.shape == x.shape and residual.dtype == x.dtype and residual.device == x.device,
                f"residual must match x ({tuple(x.shape)} {x.dtype} on {x.device}), got "
                f"{tuple(residual.shape)} {residual.dtype} on {residual.device}")
    lib.require(residual.is_contiguous(), "residual must be contiguous")
    return torch.ops.voxcpm.add_rmsnorm(x, residual, weight, eps, residual_scale)
