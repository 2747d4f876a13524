"""Helpers the op tests share: seeded random inputs on the GPU and the per-dtype tolerance check.

Tolerances (absolute and relative): bf16 1.6e-2 (two bf16 ulps near 1), fp16 2e-3, fp32 2e-5."""

from __future__ import annotations

import torch

DEVICE = "cuda"
TOLERANCE = {torch.bfloat16: 1.6e-2, torch.float16: 2e-3, torch.float32: 2e-5}


def close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> None:
    tol = TOLERANCE[dtype]
    assert torch.isfinite(actual).all(), "non-finite values in the kernel output"
    torch.testing.assert_close(actual.float(), expected.float(), atol=tol, rtol=tol)


def randn(*shape: int, dtype: torch.dtype, seed: int, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    return (torch.randn(*shape, generator=g, device=DEVICE) * scale).to(dtype)
