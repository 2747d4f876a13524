"""Snake followed by the depthwise dilated causal conv (kernel 7, left zero padding 6 * dilation, bias)
that opens each AudioVAE residual unit: CUDA op and PyTorch reference.

The reference runs Snake (~6 elementwise kernels) and then the padded conv, writing the activation
and the padded copy to memory in between; the CUDA op reads x once and writes only the conv output.
It keeps the activation in fp32 and rounds once, at the end. Tolerances (tests/gpu/
test_snake_depthwise_conv_gpu.py), with m = bias + sum_k |weight_k| |snake(x)| over the taps (the
size of the terms summed):
- fp32: |op - ref| <= 1e-5 m + 1e-6 (summation order and sine implementations differ).
- bf16 / fp16: the reference evaluated in fp32 and rounded once to within one ulp of the result plus
  1e-5 m. The model's low-precision path rounds the activation to dtype (after each of Snake's ops)
  before the conv, so |op - ref| <= 6 u sum_k |weight_k| (|x| + sin(alpha x)^2 / alpha) + one ulp of
  the result, u = 2^-8 (bf16) or 2^-11 (fp16) (the Snake bound of ops/snake.py carried through the
  taps).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from voxcpm_triton.ops import library as lib
from voxcpm_triton.ops.snake import snake_ref

TAPS = 7


def snake_depthwise_conv_ref(x: torch.Tensor, alpha: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                             dilation: int) -> torch.Tensor:
    """conv1d(pad(snake(x), (6 * dilation, 0)), weight, bias, dilation, groups=C); x [B, C, T]."""
    activation = F.pad(snake_ref(x, alpha), ((TAPS - 1) * dilation, 0))
    return F.conv1d(activation, weight, bias, 1, 0, dilation, x.shape[1])


@torch.library.custom_op("voxcpm::snake_depthwise_conv", mutates_args=(),
                         schema="(Tensor x, Tensor alpha, Tensor weight, Tensor? bias, int dilation) -> Tensor")
def _snake_depthwise_conv_op(x: torch.Tensor, alpha: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                             dilation: int) -> torch.Tensor:
    if not lib.kernel_ready(x):
        return snake_depthwise_conv_ref(x, alpha, weight, bias, dilation).contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    with lib.device_of(x):
        error = lib.library().voxcpm_snake_depthwise_conv(
            lib.ptr(x), x.stride(0), x.stride(1), lib.ptr(alpha), lib.ptr(weight), lib.ptr(bias), lib.ptr(out),
            x.shape[0], x.shape[1], x.shape[2], dilation, lib.dtype_code(x), lib.stream_of(x))
    lib.check(error, "snake_depthwise_conv")
    return out


@_snake_depthwise_conv_op.register_fake
def _(x: torch.Tensor, alpha: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
      dilation: int) -> torch.Tensor:
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def snake_depthwise_conv(x: torch.Tensor, alpha: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                         dilation: int) -> torch.Tensor:
    """Depthwise causal conv (kernel 7, `dilation`) of Snake1d(x): x [B, C, T] (last dimension
    contiguous), alpha [C] or [1, C, 1], weight [C, 1, 7], bias [C] or None, all of x's dtype and
    device; returns a contiguous [B, C, T]."""
    lib.require(x.dim() == 3 and x.is_floating_point(),
                f"x must be a floating [B, C, T] tensor, got {x.dtype} of shape {tuple(x.shape)}")
    channels, length = x.shape[1], x.shape[2]
    lib.require(channels > 0 and length > 0, f"x needs C > 0 channels and T > 0 samples, got shape {tuple(x.shape)}")
    lib.require(x.stride(-1) == 1 or length == 1, f"x's last dimension must be contiguous, got strides {x.stride()}")
    lib.require(1 <= dilation <= 1024, f"dilation must be in [1, 1024], got {dilation}")
    lib.require(tuple(alpha.shape) in ((channels,), (1, channels, 1)),
                f"alpha must have shape [{channels}] or [1, {channels}, 1], got {tuple(alpha.shape)}")
    lib.require(tuple(weight.shape) == (channels, 1, TAPS),
                f"weight must have shape [{channels}, 1, {TAPS}] (depthwise, kernel {TAPS}), got {tuple(weight.shape)}")
    lib.require(bias is None or tuple(bias.shape) == (channels,),
                f"bias must be None or of shape [{channels}], got {None if bias is None else tuple(bias.shape)}")
    for name, t in (("alpha", alpha), ("weight", weight), ("bias", bias)):
        if t is not None:
            lib.require(t.dtype == x.dtype and t.device == x.device,
                        f"{name} must be {x.dtype} on {x.device} like x, got {t.dtype} on {t.device}")
    return torch.ops.voxcpm.snake_depthwise_conv(x, alpha.contiguous(), weight.contiguous(),
                                                 None if bias is None else bias.contiguous(), int(dilation))
