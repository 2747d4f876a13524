"""lt_gemm: every cuBLASLt candidate computes F.linear's product; the timed choice survives a CUDA
graph capture; operands it must not take stay on F.linear."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from voxcpm_triton.ops import lt_gemm

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

# (rows, k, n): the LocDiT's o_proj at 64 streams, its gate_up at 4, the LM's down at 64, odd sizes.
SHAPES = [(1408, 2048, 1024), (88, 1024, 8192), (64, 6144, 2048), (200, 96, 160)]


def _operands(rows: int, k: int, n: int, dtype: torch.dtype, bias: bool):
    generator = torch.Generator(device="cuda").manual_seed(rows * 7 + k + n)
    x = torch.randn(rows, k, device="cuda", dtype=dtype, generator=generator)
    w = torch.randn(n, k, device="cuda", dtype=dtype, generator=generator) / k ** 0.5
    b = torch.randn(n, device="cuda", dtype=dtype, generator=generator) if bias else None
    return x, w, b


def _assert_close(out: torch.Tensor, expected: torch.Tensor) -> None:
    # Both round one fp32 accumulation to 16 bits; summation orders differ: ~2 ulp of the output.
    torch.testing.assert_close(out.float(), expected.float(), rtol=1.6e-2, atol=1.6e-2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_every_candidate_matches_f_linear(shape, bias, dtype):
    x, w, b = _operands(*shape, dtype, bias)
    plan, algos = lt_gemm.candidates(x, w, b)
    assert algos, "cuBLASLt offered no algorithm"
    expected = F.linear(x, w, b)
    for algo in algos:
        _assert_close(lt_gemm.run_algo(plan, algo, x, w, b), expected)


@pytest.mark.parametrize("bias", [False, True])
def test_tuned_choice_is_used_untimed_shapes_stay_on_f_linear(bias):
    x, w, b = _operands(1408, 1024, 2560, torch.bfloat16, bias)
    x = x[:1400 - 7 * bias]  # a row count no other test times
    assert lt_gemm.choice(x, w, b) == "untimed"
    torch.testing.assert_close(lt_gemm.linear(x, w, b), F.linear(x, w, b), rtol=0, atol=0)
    assert lt_gemm.choice(x, w, b) == "untimed", "timed outside tuning()"
    with lt_gemm.tuning():
        out = lt_gemm.linear(x, w, b)
    assert lt_gemm.choice(x, w, b) in ("cuBLASLt", "F.linear")
    _assert_close(out, F.linear(x, w, b))
    _assert_close(lt_gemm.linear(x, w, b), F.linear(x, w, b))


def test_choice_replays_in_a_cuda_graph():
    x, w, b = _operands(1408, 2048, 1024, torch.bfloat16, True)
    with lt_gemm.tuning():
        lt_gemm.linear(x, w, b)
    static_x = x.clone()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = lt_gemm.linear(static_x, w, b)
    for seed in range(3):
        static_x.copy_(torch.randn(x.shape, device="cuda", generator=torch.Generator("cuda").manual_seed(seed)))
        graph.replay()
        _assert_close(out, F.linear(static_x, w, b))


def test_misaligned_or_few_rows_stay_on_f_linear():
    x, w, _ = _operands(1409, 1024, 1024, torch.bfloat16, False)
    shifted = x.view(-1)[8:8 + 1408 * 1024].view(1408, 1024)  # starts 16 B in: not 256-byte aligned
    assert shifted.data_ptr() % lt_gemm.ALIGNMENT != 0
    assert not lt_gemm.takes(shifted, w, None)
    assert not lt_gemm.takes(x[:lt_gemm.MIN_ROWS - 1], w, None)
    with lt_gemm.tuning():
        torch.testing.assert_close(lt_gemm.linear(shifted, w), F.linear(shifted, w), rtol=0, atol=0)
    assert lt_gemm.choice(shifted, w) == "F.linear"
