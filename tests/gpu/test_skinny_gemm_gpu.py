"""The skinny_gemm kernel (x [m <= 32, k] @ weight^T, plain and with the SwiGLU epilogue) against
a float32 matmul of the same low-precision inputs, on VoxCPM2's layer shapes and edge shapes; its
RMSNorm (ROW_RMS) and residual-add options against skinny_gemm_ref computed in fp32.

Tolerance: the kernel accumulates in fp32 and rounds once, so it sits within one output rounding of
the fp32 product: 1.6e-2 relative / absolute for bf16 (two ulps near 1), 2e-3 for fp16. SwiGLU is
compared with swiglu_ref applied to the kernel-precision product rounded to the dtype.
Build the library first: build/build_kernels.sh.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tests.gpu.op_checks import DEVICE, randn
from voxcpm_triton import ops
from voxcpm_triton.ops import library, skinny_linear as sg

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

TOLERANCE = {torch.bfloat16: 1.6e-2, torch.float16: 2e-3}
ROWS = (1, 2, 7, 8, 9, 16, 22, 31, 32)
# (k, n): LocDiT qkv / o / gate_up / down, LM qkv / gate_up / down, and the smallest legal shape.
SHAPES = ((1024, 3072), (1024, 1024), (1024, 8192), (4096, 1024), (2048, 2560), (2048, 12288), (6144, 2048),
          (32, 32))


@pytest.fixture(scope="module", autouse=True)
def kernels_loaded():
    assert library.library() is not None, f"kernels library not loaded ({library.library_status()})"


def operands(m: int, k: int, n: int, dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    # Weight scale 1/sqrt(k) keeps outputs ~N(0, 1), where the tolerances are stated.
    return randn(m, k, dtype=dtype, seed=seed), randn(n, k, dtype=dtype, seed=seed + 1, scale=k ** -0.5)


def expected(x: torch.Tensor, weight: torch.Tensor, epilogue: int) -> torch.Tensor:
    product = (x.float() @ weight.float().t()).to(x.dtype)
    return ops.swiglu_ref(product) if epilogue == sg.SWIGLU else product


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16))
@pytest.mark.parametrize("k,n", SHAPES)
@pytest.mark.parametrize("m", ROWS)
@pytest.mark.parametrize("epilogue", (sg.PLAIN, sg.SWIGLU))
def test_kernel_matches_fp32_product(epilogue, m, k, n, dtype):
    x, weight = operands(m, k, n, dtype, seed=m * 7 + k + n)
    out = ops.skinny_gemm(x, weight, epilogue)
    assert out.shape == (m, n // 2 if epilogue == sg.SWIGLU else n) and out.dtype == dtype
    tol = TOLERANCE[dtype]
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), expected(x, weight, epilogue).float(), atol=tol, rtol=tol)


@pytest.mark.parametrize("m", (1, 22))
def test_split_k_is_deterministic_and_leaves_counters_zero(m):
    x, weight = operands(m, 4096, 1024, torch.bfloat16, seed=3)
    assert library.library().voxcpm_skinny_gemm_workspace_bytes(m, 1024, 4096, sg.PLAIN) > 0  # split-K path
    first = ops.skinny_gemm(x, weight)
    for _ in range(5):
        assert torch.equal(ops.skinny_gemm(x, weight), first)
    torch.cuda.synchronize()
    assert int(sg._counters[torch.device(DEVICE, torch.cuda.current_device())].abs().sum()) == 0


def test_linear_and_gate_up_swiglu_route_to_the_kernel_and_fall_back():
    x, weight = operands(22, 1024, 8192, torch.bfloat16, seed=5)
    x3 = x.view(2, 11, 1024)
    torch.testing.assert_close(ops.gate_up_swiglu(x3, weight),
                               ops.skinny_gemm(x, weight, sg.SWIGLU).view(2, 11, 4096), atol=0, rtol=0)
    few = x[:sg.PLAIN_MAX_ROWS]
    torch.testing.assert_close(ops.linear(few, weight), ops.skinny_gemm(few, weight), atol=0, rtol=0)
    # Plain GEMMs past PLAIN_MAX_ROWS stay on cuBLAS.
    past = randn(sg.PLAIN_MAX_ROWS + 1, 1024, dtype=torch.bfloat16, seed=9)
    torch.testing.assert_close(ops.linear(past, weight), torch.nn.functional.linear(past, weight), atol=0, rtol=0)
    many = randn(40, 1024, dtype=torch.bfloat16, seed=6)  # more rows than the kernel takes: cuBLAS
    torch.testing.assert_close(ops.linear(many, weight), torch.nn.functional.linear(many, weight), atol=0, rtol=0)
    odd = randn(4, 1000, dtype=torch.bfloat16, seed=7)  # k not a multiple of 32
    odd_weight = randn(64, 1000, dtype=torch.bfloat16, seed=8)
    torch.testing.assert_close(ops.linear(odd, odd_weight), torch.nn.functional.linear(odd, odd_weight), atol=0, rtol=0)


def test_replays_inside_a_cuda_graph():
    rows = sg.PLAIN_MAX_ROWS  # plain GEMMs past it stay on cuBLAS
    x, weight = operands(rows, 2048, 2560, torch.bfloat16, seed=11)
    _, gate_up = operands(rows, 2048, 12288, torch.bfloat16, seed=12)
    static_x = x.clone()
    ops.linear(static_x, weight)  # eager call first: makes the counters outside the capture
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        ops.linear(static_x, weight)
        ops.gate_up_swiglu(static_x, gate_up)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plain = ops.linear(static_x, weight)
        fused = ops.gate_up_swiglu(static_x, gate_up)
    for seed in (20, 21, 22):
        static_x.copy_(randn(rows, 2048, dtype=torch.bfloat16, seed=seed))
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(plain, ops.skinny_gemm(static_x, weight))
        assert torch.equal(fused, ops.skinny_gemm(static_x, gate_up, sg.SWIGLU))


GLOBAL_PATH_SCRIPT = """
import sys, torch
from tests.gpu.test_skinny_gemm_gpu import operands
from voxcpm_triton import ops
m, k, n, epilogue = map(int, sys.argv[1:5])
x, weight = operands(m, k, n, torch.bfloat16, seed=m + k + n)
torch.save(ops.skinny_gemm(x, weight, epilogue).cpu(), sys.argv[5])
"""


@pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.get_device_capability()[0] < 9,
                    reason="thread block clusters need compute capability 9")
@pytest.mark.parametrize("m,k,n,epilogue", ((1, 2048, 2048, sg.PLAIN), (22, 2048, 1024, sg.PLAIN),
                                            (22, 4096, 1024, sg.PLAIN), (9, 1024, 2048, sg.SWIGLU)))
def test_global_split_reduction_still_matches_on_hopper(tmp_path, m, k, n, epilogue):
    """On Hopper the split sums go through a cluster's shared memory; the global-memory path
    (VOXCPM_SKINNY_CLUSTER=0, read once per process: so a child process) stays correct there. The
    two may split k differently (clusters take at most 8 splits), so they agree within the
    kernel's tolerance, not bit for bit."""
    assert library.library().voxcpm_skinny_gemm_workspace_bytes(m, n, k, epilogue) > 0  # split-K path
    x, weight = operands(m, k, n, torch.bfloat16, seed=m + k + n)
    saved = tmp_path / "global.pt"
    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, VOXCPM_SKINNY_CLUSTER="0", PYTHONPATH=str(root))
    subprocess.run([sys.executable, "-c", GLOBAL_PATH_SCRIPT, str(m), str(k), str(n), str(epilogue), str(saved)],
                   env=env, check=True, cwd=root, timeout=120)
    tol = TOLERANCE[torch.bfloat16]
    reference = expected(x, weight, epilogue).float().cpu()
    torch.testing.assert_close(torch.load(saved).float(), reference, atol=tol, rtol=tol)
    torch.testing.assert_close(ops.skinny_gemm(x, weight, epilogue).float().cpu(), reference, atol=tol, rtol=tol)

def gain(k: int, dtype: torch.dtype) -> torch.Tensor:
    return (torch.rand(k, generator=torch.Generator(device=DEVICE).manual_seed(k), device=DEVICE) + 0.5).to(dtype)


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16))
@pytest.mark.parametrize("k,n", SHAPES)
@pytest.mark.parametrize("m", (1, 9, 22, 32))
@pytest.mark.parametrize("epilogue", (sg.ROW_RMS, sg.SWIGLU | sg.ROW_RMS))
def test_row_rms_matches_reference(epilogue, m, k, n, dtype):
    """The reference rounds x * gain to the dtype as the kernel does, so the two differ by the fp32
    summation order and the output rounding only. Rows of x are scaled by up to 8 so that the
    row scale matters."""
    x, weight = operands(m, k, n, dtype, seed=m + 3 * k + n)
    x = (x.float() * torch.linspace(0.125, 8, m, device=DEVICE)[:, None]).to(dtype)
    norm = gain(k, dtype)
    out = ops.skinny_gemm(x, weight, epilogue, norm, 1e-6)
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(out.float(), sg.skinny_gemm_ref(x, weight, epilogue, norm, 1e-6).float(), atol=tol,
                               rtol=tol)


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16))
@pytest.mark.parametrize("k,n", ((2048, 1024), (4096, 1024), (6144, 2048), (32, 32)))
@pytest.mark.parametrize("m", (1, 22, 32))
def test_residual_add_in_place_matches_reference(m, k, n, dtype):
    x, weight = operands(m, k, n, dtype, seed=m + k + 5 * n)
    residual = randn(m, n, dtype=dtype, seed=m + 1) * 4
    expected = sg.skinny_gemm_ref(x, weight, sg.RESIDUAL, residual=residual, residual_scale=0.375)
    pointer = residual.data_ptr()
    assert ops.linear_residual_(x, weight, residual, 0.375) is residual and residual.data_ptr() == pointer
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(residual.float(), expected.float(), atol=4 * tol, rtol=tol)


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16))
@pytest.mark.parametrize("k,n", ((64, 1024), (1024, 64), (2048, 2048), (1024, 1024)))
@pytest.mark.parametrize("m", (1, 8, 9, 32))
def test_bias_in_the_epilogue_matches_the_linear_layer(m, k, n, dtype):
    """ops.linear with a bias runs on the kernel (RESIDUAL | BIAS: one [n] row added to every row)
    for the projections' shapes (VoxCPM2's 64-wide patches in and out, 1024 / 2048 wide
    projections). Bias values up to ~4 so that a wrong row or column would show."""
    x, weight = operands(m, k, n, dtype, seed=m + k + 7 * n)
    bias = randn(n, dtype=dtype, seed=n + 2) * 4
    out = ops.linear(x, weight, bias)
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(out.float(), sg.skinny_gemm_ref(x, weight, sg.RESIDUAL | sg.BIAS, residual=bias).float(),
                               atol=4 * tol, rtol=tol)
    torch.testing.assert_close(out.float(), F.linear(x.float(), weight.float(), bias.float()), atol=4 * tol, rtol=tol)


def test_normed_layer_ops_against_norm_then_gemm():
    """normed_linear / normed_gate_up_swiglu against the rmsnorm op followed by the plain kernel:
    the same math with the norm's two roundings where the kernel has one, so within a few ulps."""
    x, weight = operands(22, 1024, 2560, torch.bfloat16, seed=30)
    _, gate_up = operands(22, 1024, 8192, torch.bfloat16, seed=31)
    norm = gain(1024, torch.bfloat16)
    normed = ops.rmsnorm(x, norm, 1e-6)
    tol = 3 * TOLERANCE[torch.bfloat16]
    torch.testing.assert_close(ops.normed_linear(x.view(2, 11, 1024), weight, norm, 1e-6).view(22, 2560),
                               ops.linear(normed, weight), atol=tol, rtol=tol)
    torch.testing.assert_close(ops.normed_gate_up_swiglu(x, gate_up, norm, 1e-6), ops.gate_up_swiglu(normed, gate_up),
                               atol=tol, rtol=tol)


@pytest.mark.parametrize("m", (1, 22))
def test_row_rms_split_k_is_deterministic_and_leaves_counters_zero(m):
    x, weight = operands(m, 4096, 1024, torch.bfloat16, seed=3)
    norm = gain(4096, torch.bfloat16)
    assert library.library().voxcpm_skinny_gemm_workspace_bytes(m, 1024, 4096, sg.ROW_RMS) > 0  # split-K path
    first = ops.skinny_gemm(x, weight, sg.ROW_RMS, norm, 1e-6)
    for _ in range(5):
        assert torch.equal(ops.skinny_gemm(x, weight, sg.ROW_RMS, norm, 1e-6), first)
    torch.cuda.synchronize()
    assert int(sg._counters[torch.device(DEVICE, torch.cuda.current_device())].abs().sum()) == 0


def test_normed_ops_replay_inside_a_cuda_graph():
    x, weight = operands(22, 1024, 2560, torch.bfloat16, seed=40)
    _, down = operands(22, 2560, 1024, torch.bfloat16, seed=41)
    norm = gain(1024, torch.bfloat16)
    static_x = x.clone()
    residual = randn(22, 1024, dtype=torch.bfloat16, seed=42)
    ops.normed_linear(static_x, weight, norm, 1e-6)  # eager call first: makes the counters outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        qkv = ops.normed_linear(static_x, weight, norm, 1e-6)
        ops.linear_residual_(qkv, down, residual, 1.0)
    for seed in (50, 51):
        static_x.copy_(randn(22, 1024, dtype=torch.bfloat16, seed=seed))
        before = residual.clone()
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(qkv, ops.skinny_gemm(static_x, weight, sg.ROW_RMS, norm, 1e-6))
        assert torch.equal(residual, ops.linear_residual_(qkv, down, before, 1.0))


def test_wrong_arguments_are_refused():
    x, weight = operands(4, 64, 64, torch.bfloat16, seed=1)
    with pytest.raises(ValueError, match="rows"):
        ops.skinny_gemm(randn(33, 64, dtype=torch.bfloat16, seed=2), weight)
    with pytest.raises(ValueError, match="multiples of 32"):
        ops.skinny_gemm(randn(4, 48, dtype=torch.bfloat16, seed=2), randn(64, 48, dtype=torch.bfloat16, seed=3))
    with pytest.raises(ValueError, match="epilogue"):
        ops.skinny_gemm(x, weight, 7)
    with pytest.raises(ValueError, match="out_features"):
        ops.skinny_gemm(x.float(), weight.float())
