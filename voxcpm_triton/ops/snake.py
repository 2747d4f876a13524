"""Snake activation of the AudioVAE (x + sin(alpha x)^2 / (alpha + 1e-9), alpha per channel): CUDA op
and PyTorch reference.

PyTorch runs the expression as ~6 elementwise kernels, each a full pass over the decoder's largest
activations; the CUDA op reads x once and writes the result once. It computes in fp32 from the
stored x and alpha and rounds once, to x's dtype. Tolerances (tests/gpu/test_snake_gpu.py):
- fp32: equals the reference to a few fp32 ulps (the sine implementations differ): 1e-5 abs + rel.
- bf16 / fp16: equals the reference evaluated in fp32 and rounded once (snake_ref(x.float(),
  alpha.float()).to(dtype)) to within one ulp of the result (plus 2e-5 absolute: the fast sine of
  the low-precision path is accurate to ~4e-7). The reference evaluated in bf16 / fp16, the model's
  PyTorch path, rounds after every op (alpha * x, sin, square, reciprocal, product, sum), so the op
  is the more accurate of the two; they differ by |op - ref| <= 6 u (|x| + sin(alpha x)^2 / alpha)
  with u = 2^-8 (bf16) or 2^-11 (fp16): up to 3.3 u measured for the per-op rounding, plus the op's
  final rounding.
"""

from __future__ import annotations

import torch

from voxcpm_triton.ops import library as lib


def snake_ref(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """The AudioVAE's Snake1d expression; x [..., C, T], alpha [C] or [1, C, 1]."""
    alpha = alpha.reshape(-1, 1)
    return x + torch.sin(alpha * x).pow(2) * (alpha + 1e-9).reciprocal()


@torch.library.custom_op("voxcpm::snake", mutates_args=(), schema="(Tensor x, Tensor alpha) -> Tensor")
def _snake_op(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    if not lib.kernel_ready(x):
        return snake_ref(x, alpha).contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    batch, batch_stride = (x.shape[0], x.stride(0)) if x.dim() == 3 else (1, x.numel())
    with lib.device_of(x):
        error = lib.library().voxcpm_snake(lib.ptr(x), batch_stride, x.stride(-2), lib.ptr(alpha), lib.ptr(out),
                                           batch, x.shape[-2], x.shape[-1], lib.dtype_code(x), lib.stream_of(x))
    lib.check(error, "snake")
    return out


@_snake_op.register_fake
def _(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def snake(x: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """Snake1d of x [B, C, T] or [C, T] (last dimension contiguous; other strides free, so a view
    trimmed along T is fine) with alpha [C] or [1, C, 1] of x's dtype; returns a contiguous tensor."""
    lib.require(x.dim() in (2, 3) and x.is_floating_point(),
                f"x must be a floating [B, C, T] or [C, T] tensor, got {x.dtype} of shape {tuple(x.shape)}")
    channels, length = x.shape[-2], x.shape[-1]
    lib.require(channels > 0 and length > 0, f"x needs C > 0 channels and T > 0 samples, got shape {tuple(x.shape)}")
    lib.require(x.stride(-1) == 1 or length == 1, f"x's last dimension must be contiguous, got strides {x.stride()}")
    lib.require(tuple(alpha.shape) in ((channels,), (1, channels, 1)),
                f"alpha must have shape [{channels}] or [1, {channels}, 1] for x of shape {tuple(x.shape)}, "
                f"got {tuple(alpha.shape)}")
    lib.require(alpha.dtype == x.dtype and alpha.device == x.device,
                f"alpha must be {x.dtype} on {x.device} like x, got {alpha.dtype} on {alpha.device}")
    return torch.ops.voxcpm.snake(x, alpha.contiguous())
