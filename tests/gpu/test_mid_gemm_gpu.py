"""The skinny_gemm op at 33-64 rows, where it runs kernels/mid_gemm.cu on Hopper: plain and SwiGLU
products against a float32 matmul of the same inputs, ROW_RMS, the residual add and the bias
against skinny_gemm_ref, determinism, a row's result independent of how many rows share the call,
CUDA-graph replay, and the routing (VOXCPM_MID_GEMM=0, shapes it does not take).

Tolerances as in test_skinny_gemm_gpu.py: one output rounding of the fp32 product.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.gpu.op_checks import DEVICE, randn
from tests.gpu.test_skinny_gemm_gpu import TOLERANCE, expected, gain, operands
from voxcpm_triton import ops
from voxcpm_triton.ops import library, skinny_linear as sg

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9,
                       reason="mid_gemm needs a compute capability 9 GPU"),
]

ROWS = (33, 40, 57, 64)
# (k, n): LM qkv / o / gate_up / down, LocDiT qkv / gate_up / down, k stages the splits share
# unevenly (9 over 8), and the smallest legal shape.
SHAPES = ((2048, 2560), (2048, 2048), (2048, 12288), (6144, 2048), (1024, 3072), (1024, 8192), (4096, 1024),
          (1152, 1024), (128, 128))


@pytest.fixture(scope="module", autouse=True)
def kernels_loaded():
    assert library.library() is not None, f"kernels library not loaded ({library.library_status()})"


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16))
@pytest.mark.parametrize("k,n", SHAPES)
@pytest.mark.parametrize("m", ROWS)
@pytest.mark.parametrize("epilogue", (sg.PLAIN, sg.SWIGLU))
def test_matches_fp32_product(epilogue, m, k, n, dtype):
    x, weight = operands(m, k, n, dtype, seed=m * 5 + k + n)
    assert sg._kernel_takes(x, weight)
    out = ops.skinny_gemm(x, weight, epilogue)
    assert out.shape == (m, n // 2 if epilogue == sg.SWIGLU else n) and out.dtype == dtype
    assert torch.isfinite(out).all()
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(out.float(), expected(x, weight, epilogue).float(), atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16))
@pytest.mark.parametrize("k,n", ((2048, 2560), (2048, 12288), (1024, 8192), (128, 128)))
@pytest.mark.parametrize("m", (33, 64))
@pytest.mark.parametrize("epilogue", (sg.ROW_RMS, sg.SWIGLU | sg.ROW_RMS))
def test_row_rms_matches_reference(epilogue, m, k, n, dtype):
    """Rows scaled by up to 8 so that a wrong row scale shows."""
    x, weight = operands(m, k, n, dtype, seed=m + 3 * k + n)
    x = (x.float() * torch.linspace(0.125, 8, m, device=DEVICE)[:, None]).to(dtype)
    norm = gain(k, dtype)
    out = ops.skinny_gemm(x, weight, epilogue, norm, 1e-6)
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(out.float(), sg.skinny_gemm_ref(x, weight, epilogue, norm, 1e-6).float(), atol=tol,
                               rtol=tol)


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16))
@pytest.mark.parametrize("k,n", ((2048, 2048), (6144, 2048), (128, 128)))
@pytest.mark.parametrize("m", (33, 64))
def test_residual_add_in_place_matches_reference(m, k, n, dtype):
    x, weight = operands(m, k, n, dtype, seed=m + k + 5 * n)
    residual = randn(m, n, dtype=dtype, seed=m + 1) * 4
    reference = sg.skinny_gemm_ref(x, weight, sg.RESIDUAL, residual=residual, residual_scale=0.375)
    pointer = residual.data_ptr()
    assert ops.linear_residual_(x, weight, residual, 0.375) is residual and residual.data_ptr() == pointer
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(residual.float(), reference.float(), atol=4 * tol, rtol=tol)


@pytest.mark.parametrize("m", (33, 64))
def test_bias_in_the_epilogue_matches_the_linear_layer(m):
    x, weight = operands(m, 1024, 2048, torch.bfloat16, seed=m + 9)
    bias = randn(2048, dtype=torch.bfloat16, seed=m + 2) * 4
    out = torch.ops.voxcpm.skinny_gemm_bias(x, weight, bias)
    tol = TOLERANCE[torch.bfloat16]
    torch.testing.assert_close(out.float(), F.linear(x.float(), weight.float(), bias.float()), atol=4 * tol, rtol=tol)


@pytest.mark.parametrize("epilogue", (sg.PLAIN, sg.SWIGLU | sg.ROW_RMS))
def test_deterministic_and_a_row_does_not_depend_on_the_others(epilogue):
    """The split plan depends on the weight's shape alone, so row r sums in the same order whether
    33 or 64 rows share the call: a stream's LM rows come out the same in every bucket of 33-64."""
    x, weight = operands(64, 2048, 12288, torch.bfloat16, seed=70)
    norm = gain(2048, torch.bfloat16) if epilogue & sg.ROW_RMS else None
    first = ops.skinny_gemm(x, weight, epilogue, norm, 1e-6)
    for _ in range(3):
        assert torch.equal(ops.skinny_gemm(x, weight, epilogue, norm, 1e-6), first)
    assert torch.equal(ops.skinny_gemm(x[:40].contiguous(), weight, epilogue, norm, 1e-6), first[:40])


def test_replays_inside_a_cuda_graph():
    x, qkv = operands(64, 2048, 2560, torch.bfloat16, seed=80)
    _, o_proj = operands(64, 2560, 2048, torch.bfloat16, seed=81)
    norm = gain(2048, torch.bfloat16)
    static_x = x.clone()
    residual = randn(64, 2048, dtype=torch.bfloat16, seed=82)
    ops.normed_linear(static_x, qkv, norm, 1e-6)  # the first call sets the kernel's shared-memory limit
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.normed_linear(static_x, qkv, norm, 1e-6)
        ops.linear_residual_(out, o_proj, residual, 1.0)
    for seed in (83, 84):
        static_x.copy_(randn(64, 2048, dtype=torch.bfloat16, seed=seed))
        before = residual.clone()
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, ops.skinny_gemm(static_x, qkv, sg.ROW_RMS, norm, 1e-6))
        assert torch.equal(residual, ops.linear_residual_(out, o_proj, before, 1.0))


def test_routing(monkeypatch):
    x, weight = operands(48, 2048, 2048, torch.bfloat16, seed=90)
    assert sg._kernel_takes(x, weight) and sg.takes_normed(x, weight)
    # Shapes it does not take (n or k not a multiple of 128) go to cuBLAS and the norm kernels.
    assert not sg._kernel_takes(x, weight[:2000])
    assert not sg._kernel_takes(x[:, :2016].contiguous(), weight[:, :2016].contiguous())
    assert not sg._kernel_takes(randn(65, 2048, dtype=torch.bfloat16, seed=91), weight)
    residual = randn(48, 2000, dtype=torch.bfloat16, seed=92)
    expected_residual = residual.float() + F.linear(x.float(), weight[:2000].float())
    ops.linear_residual_(x, weight[:2000], residual, 1.0)
    tol = 4 * TOLERANCE[torch.bfloat16]
    torch.testing.assert_close(residual.float(), expected_residual, atol=tol, rtol=tol)
    monkeypatch.setenv("VOXCPM_MID_GEMM", "0")
    assert not sg._kernel_takes(x, weight) and not sg.takes_normed(x, weight)
    assert sg._kernel_takes(x[:32].contiguous(), weight)  # skinny_gemm's rows stay on it
