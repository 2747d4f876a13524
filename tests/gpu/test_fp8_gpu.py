"""FP8 on the GPU: the quantize_fp8 kernel against its reference (bit-exact without an activation;
SwiGLU within one e4m3 step of the CPU reference and bit-exact against quantising the swiglu op's
output), inside a CUDA graph; fp8_linear (torch._scaled_mm, rowwise scales) against F.linear at the
LocDiT's shapes within the e4m3 rounding bound; and a graphed engine with VOXCPM_FP8=1 that captures
its graphs and stays close to the bf16 engine."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tests.cpu.engine_harness import run_to_completion
from tests.cpu.test_fp8_reference import product_error_bound
from tests.gpu.test_graph_runner import engine, requests, slim_voxcpm2
from voxcpm_triton import ops
from voxcpm_triton.ops import library
from voxcpm_triton.ops.fp8_linear import fp8_gemm_ref, fp8_linear, quantize_weight
from voxcpm_triton.ops.quantize_fp8 import NONE, SWIGLU, quantize_fp8, quantize_fp8_ref

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.usefixtures("no_tf32"),
]

DEVICE = "cuda"
# LocDiT of VoxCPM2 (hidden 1024, 16 q heads and 2 kv heads of 128, ffn 4096): (k, n) of qkv,
# o_proj, gate_up, down_proj; rows = 22 per stream (2 CFG branches x 11 positions).
LOCDIT_GEMMS = [(1024, 2560), (2048, 1024), (1024, 8192), (4096, 1024)]
LOCDIT_ROWS = [22 * 12, 22 * 64, 22 * 256]


@pytest.fixture(autouse=True)
def kernels_loaded():
    assert library.kernels_loaded(), f"the kernels library must be loaded: {library.library_status()}"


def ranged_rows(rows: int, width: int, dtype: torch.dtype, seed: int) -> torch.Tensor:
    """Rows of magnitudes 1e-3 .. 1e3 (1e-2 .. 1e2 for fp16's range), one all-zero row."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    span = 2.0 if dtype == torch.float16 else 3.0
    magnitudes = 10.0 ** torch.linspace(-span, span, rows, device=DEVICE).unsqueeze(1)
    x = torch.randn(rows, width, generator=g, device=DEVICE) * magnitudes
    if rows > 2:
        x[rows // 2] = 0
    return x.to(dtype)


def code_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """How many e4m3 steps apart two code tensors are (sign-magnitude codes, +0 == -0)."""
    def signed(codes: torch.Tensor) -> torch.Tensor:
        bits = codes.view(torch.uint8).int()
        magnitude = bits & 0x7F
        return torch.where(bits >= 0x80, -magnitude, magnitude)
    return (signed(a) - signed(b)).abs()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("k", [16, 48, 1024, 2048, 4096, 8192, 16384])
@pytest.mark.parametrize("rows", [1, 3, 257])
def test_quantize_kernel_bit_exact_with_reference(dtype, k, rows):
    if dtype == torch.float32 and k > 8192:
        pytest.skip("fp32 rows are limited to 8192")
    x = ranged_rows(rows, k, dtype, seed=k + rows)
    codes, scale = quantize_fp8(x)
    expected_codes, expected_scale = quantize_fp8_ref(x.cpu())
    assert codes.shape == (rows, k) and scale.shape == (rows, 1)
    assert torch.equal(scale.cpu(), expected_scale)
    assert torch.equal(codes.cpu().view(torch.uint8), expected_codes.view(torch.uint8))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("k", [16, 1024, 4096])
def test_swiglu_quantize_equals_quantised_swiglu_op(dtype, k):
    gate_up = ranged_rows(300, 2 * k, dtype, seed=k) / 100
    codes, scale = quantize_fp8(gate_up, SWIGLU)
    op_codes, op_scale = quantize_fp8(ops.swiglu(gate_up), NONE)
    assert torch.equal(scale, op_scale) and torch.equal(codes.view(torch.uint8), op_codes.view(torch.uint8))
    # The CPU reference's silu can round a value one bf16 step apart: within one e4m3 step then.
    ref_codes, ref_scale = quantize_fp8_ref(gate_up.cpu(), SWIGLU)
    torch.testing.assert_close(scale.cpu(), ref_scale, rtol=2 ** -7, atol=0)
    assert code_distance(codes.cpu(), ref_codes).max() <= 1


def test_quantize_refuses_misaligned_and_bad_widths():
    x = torch.randn(4, 1024 + 8, device=DEVICE, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="aligned"):
        quantize_fp8(x.view(-1)[1:1 + 4 * 1024].view(4, 1024))
    with pytest.raises(ValueError, match="multiple of 16"):
        quantize_fp8(x[:, :1000].contiguous())


def test_quantize_in_a_cuda_graph_equals_eager():
    x = ranged_rows(64, 4096, torch.bfloat16, seed=1)
    static = x.clone()
    quantize_fp8(static, SWIGLU)  # warm up outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        codes, scale = quantize_fp8(static, SWIGLU)
    fresh = ranged_rows(64, 4096, torch.bfloat16, seed=2)
    static.copy_(fresh)
    graph.replay()
    eager_codes, eager_scale = quantize_fp8(fresh, SWIGLU)
    assert torch.equal(scale, eager_scale) and torch.equal(codes.view(torch.uint8), eager_codes.view(torch.uint8))


def locdit_operands(rows: int, k: int, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    x = torch.randn(rows, k, generator=g, device=DEVICE).to(torch.bfloat16)
    weight = (torch.randn(n, k, generator=g, device=DEVICE) / k ** 0.5).to(torch.bfloat16)
    return x, weight


@pytest.mark.parametrize("rows", LOCDIT_ROWS + [1000])
@pytest.mark.parametrize("k,n", LOCDIT_GEMMS)
def test_fp8_linear_within_rounding_bound_at_locdit_shapes(rows, k, n):
    x, weight = locdit_operands(rows, k, n, seed=rows + n)
    fp8 = quantize_weight(weight, min_rows=1)
    out = fp8_linear(x, fp8)
    assert out.dtype == torch.bfloat16 and out.shape == (rows, n)
    exact = F.linear(x.float(), weight.float())
    # e4m3 rounding of both operands (worst case) plus the bf16 rounding of the output.
    bound = product_error_bound(x.float(), weight.float()) * 1.01 + exact.abs() * 2 ** -8 + 1e-3
    assert ((out.float() - exact).abs() <= bound).all()
    relative_rms = ((out.float() - exact).pow(2).mean() / exact.pow(2).mean()).sqrt().item()
    print(f"fp8_linear rows={rows} k={k} n={n}: relative RMS error {relative_rms:.4f}")
    assert relative_rms < 0.05
    # The GEMM itself (fast fp32 accumulation) against the reference on the same codes.
    codes, scale = quantize_fp8(x)
    torch.testing.assert_close(out.float(), fp8_gemm_ref(codes, scale, fp8, torch.float32), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("rows", [22 * 64, 1000])
def test_fp8_swiglu_down_projection(rows):
    g = torch.Generator(device=DEVICE).manual_seed(rows)
    gate_up = torch.randn(rows, 8192, generator=g, device=DEVICE).to(torch.bfloat16)
    down = (torch.randn(1024, 4096, generator=g, device=DEVICE) / 64).to(torch.bfloat16)
    out = fp8_linear(gate_up, quantize_weight(down, min_rows=1), SWIGLU)
    activation = ops.swiglu(gate_up)
    exact = F.linear(activation.float(), down.float())
    bound = product_error_bound(activation.float(), down.float()) * 1.01 + exact.abs() * 2 ** -8 + 1e-3
    assert ((out.float() - exact).abs() <= bound).all()


def test_graphed_engine_with_fp8_captures_and_stays_close_to_bf16(monkeypatch):
    """VoxCPM2 widths with 2 LocDiT layers; min rows 64 so every LocDiT GEMM of 6 streams (bucket 8:
    176 rows, 64 in the trimmed last layer) takes FP8. First patches only: later ones pass FSQ,
    where a small difference can flip a level and move the trajectory legitimately."""
    model = slim_voxcpm2(torch.bfloat16)
    monkeypatch.setenv("VOXCPM_FP8", "0")
    plain = run_to_completion(engine(model, 8), requests(model, 6))
    monkeypatch.setenv("VOXCPM_FP8", "1")
    monkeypatch.setenv("VOXCPM_FP8_MIN_ROWS", "64")
    built = engine(model, 8)
    assert built.runner.fp8 and built.runner.graphs.failure is None
    fp8 = run_to_completion(built, requests(model, 6))
    assert built.runner.graphs.failure is None
    for rid, patches in plain.items():
        first, approx = patches[0], fp8[rid][0]
        assert np.isfinite(fp8[rid]).all() and fp8[rid].shape == patches.shape
        rms = float(np.sqrt(np.mean(first ** 2)))
        diff_rms = float(np.sqrt(np.mean((approx - first) ** 2)))
        print(f"{rid} fp8 vs bf16 first patch: RMS diff {diff_rms:.4g}, max {np.abs(approx - first).max():.4g} "
              f"(RMS {rms:.4g})")
        assert 0 < diff_rms <= 0.1 * rms
