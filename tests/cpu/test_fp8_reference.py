"""FP8 (e4m3) quantisation and the FP8 linear layer on the CPU (their PyTorch references): scales,
round-trip error bounds, zero rows, the SwiGLU activation, and the GEMM against F.linear within
the worst-case bound of two e4m3 roundings per product."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from voxcpm_triton.ops.fp8_linear import fp8_gemm_ref, fp8_linear, fp8_takes, quantize_weight, routed_linear
from voxcpm_triton.ops.quantize_fp8 import E4M3_MAX, NONE, SWIGLU, dequantize_fp8, quantize_fp8, quantize_fp8_ref
from voxcpm_triton.ops.swiglu import swiglu_ref

# e4m3 keeps 3 mantissa bits: a normal value rounds to within 2^-4 of itself (relative); below 2^-6
# (subnormal codes) the step is 2^-9, so the error there is at most 2^-10 (times the row's scale).
RELATIVE = 2.0 ** -4
SUBNORMAL = 2.0 ** -10


def rows_with_range(rows: int, k: int, seed: int) -> torch.Tensor:
    """Rows of very different magnitudes (1e-3 .. 1e3) with a spread of values inside each."""
    g = torch.Generator().manual_seed(seed)
    magnitudes = 10.0 ** torch.linspace(-3, 3, rows).unsqueeze(1)
    return torch.randn(rows, k, generator=g) * magnitudes


def error_bound(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return RELATIVE * x.abs() + SUBNORMAL * scale


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_scales_are_row_absmax_over_448_and_codes_reach_448(dtype):
    x = rows_with_range(9, 64, seed=0).clamp(-6e4, 6e4).to(dtype)
    codes, scale = quantize_fp8_ref(x)
    assert codes.dtype == torch.float8_e4m3fn and codes.shape == (9, 64) and scale.shape == (9, 1)
    assert torch.equal(scale, x.float().abs().amax(dim=1, keepdim=True) / E4M3_MAX)
    assert torch.equal(codes.float().abs().amax(dim=1), torch.full((9,), E4M3_MAX))


def test_round_trip_error_within_half_an_e4m3_step():
    x = rows_with_range(16, 256, seed=1)
    codes, scale = quantize_fp8_ref(x)
    error = (dequantize_fp8(codes, scale) - x).abs()
    assert (error <= error_bound(x, scale) * (1 + 1e-6)).all()
    # Rounding to nearest: the typical error is well below the bound, not at it.
    assert (error / (x.abs() + 1e-30)).median() < RELATIVE / 2


def test_zero_rows_get_scale_one_and_zero_codes():
    x = torch.randn(4, 32, generator=torch.Generator().manual_seed(7))
    x[1] = 0
    x[3] = 0
    codes, scale = quantize_fp8_ref(x)
    assert scale[1].item() == 1.0 and scale[3].item() == 1.0
    assert not codes[1].float().any() and not codes[3].float().any()
    assert torch.isfinite(dequantize_fp8(codes, scale)).all()


def test_leading_dimensions_flatten_to_rows():
    x = torch.randn(2, 3, 48, generator=torch.Generator().manual_seed(8))
    codes, scale = quantize_fp8(x)
    flat_codes, flat_scale = quantize_fp8_ref(x.reshape(6, 48))
    assert codes.shape == (6, 48) and torch.equal(codes.float(), flat_codes.float())
    assert torch.equal(scale, flat_scale)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_swiglu_activation_quantises_the_swiglu_output(dtype):
    gate_up = torch.randn(5, 2 * 96, generator=torch.Generator().manual_seed(3)).to(dtype)
    codes, scale = quantize_fp8(gate_up, SWIGLU)
    expected_codes, expected_scale = quantize_fp8_ref(swiglu_ref(gate_up))
    assert codes.shape == (5, 96)
    assert torch.equal(codes.float(), expected_codes.float()) and torch.equal(scale, expected_scale)


@pytest.mark.parametrize("shape,activation,message", [
    ((4, 40), NONE, "multiple of 16"),
    ((4, 40), SWIGLU, "multiple of 16"),
    ((4, 32), 2, "activation"),
    ((4, 16400 * 2), SWIGLU, "multiple of 16"),
])
def test_bad_arguments_name_the_problem(shape, activation, message):
    with pytest.raises(ValueError, match=message):
        quantize_fp8(torch.randn(*shape), activation)


def test_non_contiguous_input_is_refused():
    with pytest.raises(ValueError, match="contiguous"):
        quantize_fp8(torch.randn(32, 8).t())


def product_error_bound(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Worst case of sum_k (x^ w^ - x w) when x^ and w^ each carry their e4m3 rounding error."""
    _, x_scale = quantize_fp8_ref(x)
    w_scale = quantize_fp8_ref(weight)[1]
    x_err = error_bound(x.float(), x_scale)
    w_err = error_bound(weight.float(), w_scale)
    x_abs, w_abs = x.float().abs(), weight.float().abs()
    return x_err @ w_abs.t() + x_abs @ w_err.t() + x_err @ w_err.t()


def test_fp8_linear_reference_within_the_rounding_bound_of_f_linear():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(64, 128, generator=g)
    weight = torch.randn(96, 128, generator=g) * 0.05
    out = fp8_linear(x, quantize_weight(weight, min_rows=1))
    exact = F.linear(x, weight)
    assert out.shape == (64, 96)
    assert ((out - exact).abs() <= product_error_bound(x, weight) * 1.001 + 1e-6).all()
    # The errors of many products mostly cancel: a few percent of the output's spread, not the bound.
    assert (out - exact).pow(2).mean().sqrt() < 0.05 * exact.pow(2).mean().sqrt()


def test_fp8_linear_with_swiglu_equals_quantised_down_of_swiglu():
    g = torch.Generator().manual_seed(5)
    gate_up = torch.randn(3, 7, 2 * 64, generator=g)
    down = quantize_weight(torch.randn(32, 64, generator=g), min_rows=1)
    fused = fp8_linear(gate_up, down, SWIGLU)
    assert fused.shape == (3, 7, 32)
    assert torch.equal(fused, fp8_linear(swiglu_ref(gate_up), down))


def test_gemm_reference_applies_both_scales():
    g = torch.Generator().manual_seed(6)
    codes, scale = quantize_fp8_ref(torch.randn(4, 32, generator=g))
    weight = quantize_weight(torch.randn(16, 32, generator=g), min_rows=1)
    expected = dequantize_fp8(codes, scale) @ dequantize_fp8(weight.codes, weight.scale.t()).t()
    # Same products, scaled before or after the sum: equal up to fp32 reassociation.
    torch.testing.assert_close(fp8_gemm_ref(codes, scale, weight, torch.float32), expected, rtol=1e-5, atol=1e-5)


def test_weights_are_quantised_per_output_channel():
    weight = torch.randn(32, 48, generator=torch.Generator().manual_seed(9)) * torch.logspace(-2, 2, 32).unsqueeze(1)
    fp8 = quantize_weight(weight, min_rows=8)
    assert fp8.codes.shape == (32, 48) and fp8.scale.shape == (1, 32) and fp8.out_features == 32
    assert fp8.codes.t().stride() == (1, 48)  # the column-major operand torch._scaled_mm takes
    assert torch.equal(fp8.scale.flatten(), weight.abs().amax(dim=1) / E4M3_MAX)
    with pytest.raises(ValueError, match="multiples of 16"):
        quantize_weight(torch.randn(30, 48), min_rows=1)
    with pytest.raises(ValueError, match="min_rows"):
        quantize_weight(weight, min_rows=0)


def test_routing_by_row_count():
    g = torch.Generator().manual_seed(10)
    weight = torch.randn(32, 48, generator=g)
    fp8 = quantize_weight(weight, min_rows=10)
    few, many = torch.randn(9, 48, generator=g), torch.randn(2, 5, 48, generator=g)
    assert not fp8_takes(few, fp8) and fp8_takes(many, fp8) and not fp8_takes(many, None)
    assert torch.equal(routed_linear(few, weight, fp8), F.linear(few, weight))
    assert torch.equal(routed_linear(many, weight, None), F.linear(many, weight))
    assert torch.equal(routed_linear(many, weight, fp8), fp8_linear(many, fp8))
