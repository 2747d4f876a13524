"""The skinny_gemm op's reference (the CPU path) and its routing wrappers on the CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from voxcpm_triton import ops
from voxcpm_triton.ops import skinny_linear as sg


def operands(m: int, k: int, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, k, generator=g), torch.randn(n, k, generator=g) / k ** 0.5


def test_reference_is_the_linear_layer_and_swiglu_of_it():
    x, weight = operands(22, 64, 96)
    assert torch.equal(ops.skinny_gemm_ref(x, weight, sg.PLAIN), F.linear(x, weight))
    gate, up = F.linear(x, weight).chunk(2, dim=-1)
    torch.testing.assert_close(ops.skinny_gemm_ref(x, weight, sg.SWIGLU), F.silu(gate) * up, atol=0, rtol=0)


def test_reference_bias_is_the_linear_layer_with_bias():
    x, weight = operands(9, 64, 96, seed=5)
    bias = torch.randn(96, generator=torch.Generator().manual_seed(6))
    expected = F.linear(x, weight, bias)
    torch.testing.assert_close(sg.skinny_gemm_ref(x, weight, sg.RESIDUAL | sg.BIAS, residual=bias), expected)
    torch.testing.assert_close(ops.linear(x, weight, bias), expected)
    torch.testing.assert_close(torch.ops.voxcpm.skinny_gemm_bias(x, weight, bias), expected)


def test_reference_row_rms_is_the_gemm_of_the_normed_rows():
    """ROW_RMS: x * gain through the GEMM, then each row times rsqrt(mean(x^2) + eps); in fp32 that
    is the linear layer of rms_norm(x) up to rounding order."""
    x, weight = operands(22, 64, 96, seed=2)
    gain = torch.rand(64, generator=torch.Generator().manual_seed(3)) + 0.5
    normed = ops.rmsnorm_ref(x, gain, 1e-6)
    torch.testing.assert_close(ops.skinny_gemm_ref(x, weight, sg.ROW_RMS, gain, 1e-6), F.linear(normed, weight))
    torch.testing.assert_close(ops.skinny_gemm_ref(x, weight, sg.SWIGLU | sg.ROW_RMS, gain, 1e-6),
                               ops.swiglu_ref(F.linear(normed, weight)))
    residual = torch.randn(22, 96, generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(ops.skinny_gemm_ref(x, weight, sg.RESIDUAL, residual=residual, residual_scale=0.25),
                               residual + 0.25 * F.linear(x, weight))


def test_normed_wrappers_on_cpu_are_norm_then_gemm_then_add():
    x, weight = operands(6, 64, 128, seed=5)
    gain = torch.rand(64, generator=torch.Generator().manual_seed(6)) + 0.5
    normed = ops.rmsnorm(x, gain, 1e-5)
    assert torch.equal(ops.normed_linear(x, weight, gain, 1e-5), F.linear(normed, weight))
    assert torch.equal(ops.normed_gate_up_swiglu(x, weight, gain, 1e-5), ops.gate_up_swiglu(normed, weight))
    residual = torch.randn(6, 128, generator=torch.Generator().manual_seed(7))
    expected = residual + F.linear(x, weight) * 0.5
    assert ops.linear_residual_(x, weight, residual, 0.5) is residual  # updated in place
    torch.testing.assert_close(residual, expected, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_wrappers_on_cpu_equal_what_they_replace(dtype):
    x, weight = operands(40, 64, 128, seed=1)  # beyond the kernel's 32 rows: the fallback
    x, weight = x.to(dtype).view(4, 10, 64), weight.to(dtype)
    assert torch.equal(ops.linear(x, weight), F.linear(x, weight))
    assert torch.equal(ops.gate_up_swiglu(x, weight), ops.swiglu(F.linear(x, weight)))
    small = x[:1, :3].contiguous()
    assert torch.equal(ops.skinny_gemm(small.view(3, 64), weight), F.linear(small.view(3, 64), weight))


def test_arguments_are_validated():
    x, weight = operands(4, 64, 64)
    with pytest.raises(ValueError, match="rows"):
        ops.skinny_gemm(torch.zeros(33, 64), weight)
    with pytest.raises(ValueError, match="out_features"):
        ops.linear(x, torch.zeros(64, 32))
    with pytest.raises(ValueError, match="epilogue"):
        ops.skinny_gemm(x, weight, sg.RESIDUAL)
    with pytest.raises(ValueError, match="norm_weight"):
        ops.skinny_gemm(x, weight, sg.ROW_RMS)
    with pytest.raises(ValueError, match="norm_weight"):
        ops.normed_linear(x, weight, torch.ones(32), 1e-6)
    with pytest.raises(ValueError, match="rms_eps"):
        ops.normed_linear(x, weight, torch.ones(64), -1.0)
    with pytest.raises(ValueError, match="residual must be contiguous"):
        ops.linear_residual_(x, weight, torch.zeros(4, 32), 1.0)
    buffer = torch.zeros(4, 128)
    with pytest.raises(ValueError, match="overlap"):
        ops.linear_residual_(buffer.view(-1)[:256].view(4, 64), weight, buffer.view(-1)[128:384].view(4, 64), 1.0)
    with pytest.raises(ValueError, match="even number of rows"):
        ops.gate_up_swiglu(x, torch.zeros(63, 64))
