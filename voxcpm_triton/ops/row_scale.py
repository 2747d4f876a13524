"""The statistic of an RMSNorm folded into the next GEMM's weight: CUDA op and PyTorch reference.

rmsnorm(x) * w @ W^T equals (x @ (W diag(w))^T) * row_scale(x) per row, up to roundings. A layer
whose norm weights were folded into its qkv and gate_up weights (fast_path.enable_folded_norms)
reads the residual stream directly and applies this [rows] float32 statistic where the GEMM's
output is consumed (short_attention, the gate_up epilogue), so the normed rows are never written.
"""

from __future__ import annotations

import torch

from voxcpm_triton.ops import library as lib


def row_scale_ref(x: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.rsqrt(x.float().pow(2).mean(dim=-1) + eps)


@torch.library.custom_op("voxcpm::row_scale", mutates_args=(), schema="(Tensor x, float eps) -> Tensor")
def _row_scale_op(x: torch.Tensor, eps: float) -> torch.Tensor:
    if not lib.kernel_ready(x):
        return row_scale_ref(x, eps)
    hidden = x.shape[-1]
    out = torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)
    with lib.device_of(x):
        error = lib.library().voxcpm_row_scale(lib.ptr(x), lib.ptr(out), x.numel() // hidden, hidden, eps,
                                               lib.dtype_code(x), lib.stream_of(x))
    lib.check(error, "row_scale")
    return out


@_row_scale_op.register_fake
def _(x: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.empty(x.shape[:-1], dtype=torch.float32, device=x.device)


def check_row_scale(row_scale: torch.Tensor, rows: int, device: torch.device) -> None:
    """Raises ValueError unless row_scale is what its consumers (short_attention, the gate_up kernel)
    read: contiguous float32 [rows] on `device`."""
    lib.require(row_scale.shape == (rows,) and row_scale.dtype == torch.float32 and row_scale.is_contiguous()
                and row_scale.device == device,
                f"row_scale must be contiguous float32 [{rows}] on {device}, got {tuple(row_scale.shape)} "
                f"{row_scale.dtype} on {row_scale.device}")


def check_norm_input(norm_input: torch.Tensor, leading: tuple[int, ...], like: torch.Tensor) -> None:
    """Raises ValueError unless norm_input is what the ops that compute this statistic themselves
    (rope_kv_write, short_attention, swiglu) read: contiguous rows [*leading, hidden <= 16384] of
    like's dtype on like's device."""
    lib.require(norm_input.dim() >= 1 and norm_input.shape[:-1] == leading and 1 <= norm_input.shape[-1] <= 16384
                and norm_input.dtype == like.dtype and norm_input.device == like.device
                and norm_input.is_contiguous(),
                f"norm_input must be contiguous {like.dtype} [{', '.join(map(str, leading))}, hidden <= 16384] on "
                f"{like.device}, got {tuple(norm_input.shape)} {norm_input.dtype} on {norm_input.device}")


def row_scale(x: torch.Tensor, eps: float) -> torch.Tensor:
    """1 / sqrt(mean(x^2) + eps) over the last dimension, float32 [...] (x's leading shape)."""
    lib.require(x.dim() >= 1 and x.is_contiguous(),
                f"x must be a contiguous [..., hidden] tensor, got shape {tuple(x.shape)} strides {x.stride()}")
    lib.require(1 <= x.shape[-1] <= 16384, f"x hidden size must be in [1, 16384], got {x.shape[-1]}")
    lib.require(x.dtype in lib.KERNEL_DTYPES, f"x must be one of {lib.KERNEL_DTYPES}, got {x.dtype}")
    lib.require(eps > 0.0, f"eps must be > 0, got {eps}")
    return torch.ops.voxcpm.row_scale(x, float(eps))
