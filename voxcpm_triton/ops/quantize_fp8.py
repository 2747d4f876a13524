"""Per-row dynamic FP8 (e4m3) quantisation of GEMM activations: CUDA op and PyTorch reference.

Each row gets one fp32 scale, max|row| / 448 (448 is e4m3's largest finite value), and codes
round(row / scale) in float8_e4m3fn; code * scale gives the row back to within half an e4m3 step
(2^-4 of the value, relative). With activation SWIGLU the row quantised is silu(gate) * up of a
fused gate_up row, rounded as the swiglu op rounds it, so the down projection's FP8 input is made
without writing the bf16 activation out first.
"""

from __future__ import annotations

import torch

from voxcpm_triton.ops import library as lib
from voxcpm_triton.ops.swiglu import swiglu_ref

E4M3_MAX = 448.0
NONE, SWIGLU = 0, 1
MAX_K = 16384  # kernels/quantize_fp8.cu: at most 64 values of a row per thread (8192 for fp32)
FP8 = torch.float8_e4m3fn


def quantize_fp8_ref(x: torch.Tensor, activation: int = NONE) -> tuple[torch.Tensor, torch.Tensor]:
    """x [..., k] (or [..., 2k] with SWIGLU) -> (codes float8_e4m3fn [rows, k], scale fp32 [rows, 1])."""
    y = swiglu_ref(x) if activation == SWIGLU else x
    y = y.reshape(-1, y.shape[-1]).float()
    amax = y.abs().amax(dim=-1, keepdim=True)
    # Tensor / tensor: true division wherever this runs (CUDA divides by a host scalar through its
    # reciprocal, which can land one fp32 ulp away from the kernel's scale).
    scale = torch.where(amax > 0, amax / torch.full_like(amax, E4M3_MAX), torch.ones_like(amax))
    codes = (y / scale).clamp(-E4M3_MAX, E4M3_MAX).to(FP8)
    return codes, scale


def dequantize_fp8(codes: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """codes [rows, k] * scale [rows, 1] in fp32."""
    return codes.float() * scale


@torch.library.custom_op("voxcpm::quantize_fp8", mutates_args=(),
                         schema="(Tensor x, int activation) -> (Tensor, Tensor)")
def _quantize_fp8_op(x: torch.Tensor, activation: int) -> tuple[torch.Tensor, torch.Tensor]:
    if not lib.kernel_ready(x):
        return quantize_fp8_ref(x, activation)
    width = x.shape[-1]
    k = width // 2 if activation == SWIGLU else width
    rows = x.numel() // width
    codes = torch.empty((rows, k), dtype=FP8, device=x.device)
    scale = torch.empty((rows, 1), dtype=torch.float32, device=x.device)
    with lib.device_of(x):
        error = lib.library().voxcpm_quantize_fp8(lib.ptr(x), lib.ptr(codes), lib.ptr(scale), rows, k, activation,
                                                  lib.dtype_code(x), lib.stream_of(x))
    lib.check(error, "quantize_fp8")
    return codes, scale


@_quantize_fp8_op.register_fake
def _(x: torch.Tensor, activation: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = x.shape[-1]
    k = width // 2 if activation == SWIGLU else width
    rows = x.numel() // width
    return x.new_empty((rows, k), dtype=FP8), x.new_empty((rows, 1), dtype=torch.float32)


def quantize_fp8(x: torch.Tensor, activation: int = NONE) -> tuple[torch.Tensor, torch.Tensor]:
    """(codes float8_e4m3fn [rows, k], scale fp32 [rows, 1]) of x [..., k] (activation NONE) or of
    swiglu(x) for x [..., 2k] (activation SWIGLU). x contiguous; k a multiple of 16, <= MAX_K
    (MAX_K / 2 for fp32 x); on the GPU x 16-byte aligned."""
    lib.require(activation in (NONE, SWIGLU),
                f"activation must be {NONE} (none) or {SWIGLU} (SwiGLU), got {activation}")
    lib.require(x.dim() >= 1 and x.is_floating_point(), f"x must be a floating tensor [..., k], got {x.dtype} "
                f"of shape {tuple(x.shape)}")
    lib.require(x.is_contiguous(), f"x must be contiguous, got strides {x.stride()}")
    width = x.shape[-1]
    k = width // 2 if activation == SWIGLU else width
    max_k = MAX_K // 2 if x.dtype == torch.float32 else MAX_K
    lib.require(0 < k <= max_k and k % 16 == 0 and (activation == NONE or width % 2 == 0),
                f"x's last dimension must give k (half of it with SwiGLU) a multiple of 16 in [16, {max_k}], "
                f"got {width}")
    if lib.kernel_ready(x) and not torch.compiler.is_compiling():
        lib.require(x.data_ptr() % 16 == 0, "x must be 16-byte aligned on the GPU")
    return torch.ops.voxcpm.quantize_fp8(x, activation)
