"""Linear layers on FP8 (e4m3) tensor cores for many activation rows, and their reference.

At large batches the LocDiT's GEMMs run near bf16 peak on cuBLAS; Hopper's FP8 tensor cores
double that. Weights are quantised once per output channel (`Fp8Weight`); activations per row at
each call (quantize_fp8), and torch._scaled_mm multiplies with both scale vectors applied in its
epilogue (rowwise scaling), accumulating in fp32 (fast accumulation) and writing bf16.

`routed_linear` picks the FP8 GEMM for a layer that has an Fp8Weight when the activation has at
least its `min_rows` rows on a compute capability >= 8.9 GPU (bf16 activations) and the plain
ops.linear otherwise: below a few hundred rows a GEMM is bound by streaming its weight, where FP8
saves little and skinny_gemm serves the smallest batches. On the CPU the reference (dequantise,
fp32 matmul) stands in, so the routing and the numerics are testable there.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from voxcpm_triton.ops import library as lib
from voxcpm_triton.ops.quantize_fp8 import NONE, SWIGLU, quantize_fp8, quantize_fp8_ref
from voxcpm_triton.ops.skinny_linear import linear as bf16_linear

# torch._scaled_mm wants k and n multiples of 16 (the weights are checked when quantised).
ALIGN = 16


@dataclass
class Fp8Weight:
    """An nn.Linear weight [n, k] quantised per output channel. `codes` is row-major [n, k], so
    codes.t() is the column-major [k, n] operand torch._scaled_mm takes; `scale` is fp32 [1, n]."""

    codes: torch.Tensor
    scale: torch.Tensor
    min_rows: int

    @property
    def out_features(self) -> int:
        return self.codes.shape[0]


def quantizable(weight: torch.Tensor) -> bool:
    """Whether a [n, k] weight fits the FP8 GEMM (both dimensions multiples of 16)."""
    return weight.dim() == 2 and weight.shape[0] % ALIGN == 0 and weight.shape[1] % ALIGN == 0


def quantize_weight(weight: torch.Tensor, min_rows: int) -> Fp8Weight:
    """Per-output-channel e4m3 codes and fp32 scales of `weight` [n, k] (on its device)."""
    lib.require(quantizable(weight), f"weight must be [n, k] with n and k multiples of {ALIGN}, "
                f"got {tuple(weight.shape)}")
    lib.require(min_rows >= 1, f"min_rows must be >= 1, got {min_rows}")
    codes, scale = quantize_fp8_ref(weight.detach())
    return Fp8Weight(codes.contiguous(), scale.reshape(1, -1).contiguous(), min_rows)


@functools.cache
def _fp8_tensor_cores(device: torch.device) -> bool:
    return torch.cuda.get_device_capability(device) >= (8, 9)


def fp8_takes(x: torch.Tensor, weight: Fp8Weight | None) -> bool:
    """Whether x [..., k] (or a fused gate_up output [..., 2k]) has the rows and the device for the
    FP8 GEMM of `weight`."""
    if weight is None or x.numel() < weight.min_rows * x.shape[-1]:
        return False
    if not x.is_cuda:
        return True
    # Under torch.compile the activation is a fresh (aligned) buffer whose address is not known yet.
    aligned = torch.compiler.is_compiling() or x.data_ptr() % 16 == 0
    return (x.dtype == torch.bfloat16 and weight.codes.device == x.device and aligned and lib.kernels_loaded()
            and _fp8_tensor_cores(x.device))


def fp8_gemm_ref(codes: torch.Tensor, scale: torch.Tensor, weight: Fp8Weight, dtype: torch.dtype) -> torch.Tensor:
    """What _scaled_mm computes: the codes' products summed in fp32, then both scales."""
    products = codes.float() @ weight.codes.float().t()
    return (products * scale * weight.scale).to(dtype)


def fp8_linear(x: torch.Tensor, weight: Fp8Weight, activation: int = NONE) -> torch.Tensor:
    """x [..., k] @ weight^T -> [..., n] in x's dtype, both operands in e4m3. With activation
    SWIGLU, x is a fused gate_up output [..., 2k] and the GEMM's input is swiglu(x)."""
    width = x.shape[-1]
    k = width // 2 if activation == SWIGLU else width
    lib.require(weight.codes.shape[1] == k, f"weight must be [n, {k}] for x of shape {tuple(x.shape)}, "
                f"got {tuple(weight.codes.shape)}")
    codes, scale = quantize_fp8(x.contiguous(), activation)
    if x.is_cuda:
        out = torch._scaled_mm(codes, weight.codes.t(), scale_a=scale, scale_b=weight.scale, out_dtype=x.dtype,
                               use_fast_accum=True)
    else:
        out = fp8_gemm_ref(codes, scale, weight, x.dtype)
    return out.view(*x.shape[:-1], weight.out_features)


def routed_linear(x: torch.Tensor, weight: torch.Tensor, fp8: Fp8Weight | None) -> torch.Tensor:
    """F.linear(x, weight) without bias: on the FP8 GEMM when fp8_takes(x, fp8), else ops.linear."""
    if fp8_takes(x, fp8):
        return fp8_linear(x, fp8)
    return bf16_linear(x, weight)
