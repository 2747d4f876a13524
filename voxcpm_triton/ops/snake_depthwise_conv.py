"""Snake followed by the depthwise dilated causal conv (kernel 7, left zero padding 6 * dilation, bias)
that opens each AudioVAE residual unit, optionally followed by the unit's second Snake (`out_alpha`):
CUDA op and PyTorch reference.

The reference runs Snake (~6 elementwise kernels), the padded conv and, with out_alpha, Snake again,
writing each intermediate to memory; the CUDA op reads x once and writes only the final output.
It keeps the activation, the conv output and the second Snake in fp32 and rounds once, at the end:
the fused second Snake takes the conv output unrounded (one rounding instead of the model's
rounding of the conv output to dtype and then after each of Snake's ops). The reference evaluated
in fp32 is that computation, so the tolerances below compare the op with it rounded once.
Tolerances (tests/gpu/test_snake_depthwise_conv_gpu.py), with m = bias + sum_k |weight_k| |snake(x)|
over the taps (the size of the terms summed), for the conv output y:
- fp32: |op - ref| <= 1e-5 m + 1e-6 (summation order and sine implementations differ).
- bf16 / fp16: the reference evaluated in fp32 and rounded once to within one ulp of the result plus
  1e-5 m. The model's low-precision path rounds the activation to dtype (after each of Snake's ops)
  before the conv, so |op - ref| <= 6 u sum_k |weight_k| (|x| + sin(alpha x)^2 / alpha) + one ulp of
  the result, u = 2^-8 (bf16) or 2^-11 (fp16) (the Snake bound of ops/snake.py carried through the
  taps).
With out_alpha, the output z = snake(y) moves by at most twice y's error (dz/dy = 1 + sin(2 alpha y)
is in [0, 2]), plus the second Snake's own sine error, <= 2e-6 / alpha (accurate sinf for fp32, the
fast sine for bf16 / fp16, as in ops/snake.py), plus, against the per-op reference, Snake's per-op
rounding 6 u (|y| + sin(alpha y)^2 / alpha) and one ulp of z.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from voxcpm_triton.ops import library as lib
from voxcpm_triton.ops.snake import snake_ref

TAPS = 7


def snake_depthwise_conv_ref(x: torch.Tensor, alpha: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                             dilation: int, out_alpha: torch.Tensor | None = None) -> torch.Tensor:
    """y = conv1d(pad(snake(x, alpha), (6 * dilation, 0)), weight, bias, dilation, groups=C), then
    snake(y, out_alpha) when out_alpha is given; x [B, C, T]. In x's dtype every op rounds, as the
    model's layers do; in fp32 this is what the CUDA op computes before its one rounding."""
    activation = F.pad(snake_ref(x, alpha), ((TAPS - 1) * dilation, 0))
    y = F.conv1d(activation, weight, bias, 1, 0, dilation, x.shape[1])
    return y if out_alpha is None else snake_ref(y, out_alpha)


@torch.library.custom_op("voxcpm::snake_depthwise_conv", mutates_args=(),
                         schema="(Tensor x, Tensor alpha, Tensor weight, Tensor? bias, int dilation, "
                                "Tensor? out_alpha=None) -> Tensor")
def _snake_depthwise_conv_op(x: torch.Tensor, alpha: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                             dilation: int, out_alpha: torch.Tensor | None = None) -> torch.Tensor:
    if not lib.kernel_ready(x):
        return snake_depthwise_conv_ref(x, alpha, weight, bias, dilation, out_alpha).contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    with lib.device_of(x):
        error = lib.library().voxcpm_snake_depthwise_conv(
            lib.ptr(x), x.stride(0), x.stride(1), lib.ptr(alpha), lib.ptr(weight), lib.ptr(bias), lib.ptr(out_alpha),
            lib.ptr(out),
            x.shape[0], x.shape[1], x.shape[2], dilation, lib.dtype_code(x), lib.stream_of(x))
    lib.check(error, "snake_depthwise_conv")
    return out


@_snake_depthwise_conv_op.register_fake
def _(x: torch.Tensor, alpha: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
      dilation: int, out_alpha: torch.Tensor | None = None) -> torch.Tensor:
    return torch.empty(x.shape, dtype=x.dtype, device=x.device)


def snake_depthwise_conv(x: torch.Tensor, alpha: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                         dilation: int, out_alpha: torch.Tensor | None = None) -> torch.Tensor:
    """Depthwise causal conv (kernel 7, `dilation`) of Snake1d(x), then Snake1d with out_alpha of that
    when out_alpha is given: x [B, C, T] (last dimension contiguous), alpha and out_alpha [C] or
    [1, C, 1], weight [C, 1, 7], bias [C] or None, all of x's dtype and device; returns a contiguous
    [B, C, T]. An out_alpha of 0 leaves its channel's conv output as it is (Snake is then the
    identity; the op takes 1 / (alpha + 1e-9) in fp32, whereas the fp16 reference rounds 1e-9 to 0
    and gives NaN there)."""
    lib.require(x.dim() == 3 and x.is_floating_point(),
                f"x must be a floating [B, C, T] tensor, got {x.dtype} of shape {tuple(x.shape)}")
    channels, length = x.shape[1], x.shape[2]
    lib.require(channels > 0 and length > 0, f"x needs C > 0 channels and T > 0 samples, got shape {tuple(x.shape)}")
    lib.require(x.stride(-1) == 1 or length == 1, f"x's last dimension must be contiguous, got strides {x.stride()}")
    lib.require(1 <= dilation <= 1024, f"dilation must be in [1, 1024], got {dilation}")
    for name, a in (("alpha", alpha), ("out_alpha", out_alpha)):
        if a is not None:
            lib.require(tuple(a.shape) in ((channels,), (1, channels, 1)),
                        f"{name} must have shape [{channels}] or [1, {channels}, 1], got {tuple(a.shape)}")
    lib.require(tuple(weight.shape) == (channels, 1, TAPS),
                f"weight must have shape [{channels}, 1, {TAPS}] (depthwise, kernel {TAPS}), got {tuple(weight.shape)}")
    lib.require(bias is None or tuple(bias.shape) == (channels,),
                f"bias must be None or of shape [{channels}], got {None if bias is None else tuple(bias.shape)}")
    for name, t in (("alpha", alpha), ("weight", weight), ("bias", bias), ("out_alpha", out_alpha)):
        if t is not None:
            lib.require(t.dtype == x.dtype and t.device == x.device,
                        f"{name} must be {x.dtype} on {x.device} like x, got {t.dtype} on {t.device}")
    return torch.ops.voxcpm.snake_depthwise_conv(x, alpha.contiguous(), weight.contiguous(),
                                                 None if bias is None else bias.contiguous(), int(dilation),
                                                 None if out_alpha is None else out_alpha.contiguous())
