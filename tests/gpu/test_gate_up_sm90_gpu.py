"""gate_up_swiglu_sm90 (CUTLASS GEMM with SwiGLU in its epilogue) against swiglu(F.linear) on the
[gate; up] weight, for both schedules, row counts that do and do not fill the tiles, inside a CUDA
graph, through the timed choice and through a LocDiT-shaped MLP. Skipped off Hopper (sm_90)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from voxcpm_triton.ops import gate_up_sm90, lt_gemm
from voxcpm_triton.ops.swiglu import swiglu_ref


def _on_hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not _on_hopper(), reason="needs an sm_90 GPU")]

# (rows, k, inter): the LocDiT's gate_up at 64 and 256 streams, one partial tile, odd residues.
SHAPES = [(1408, 1024, 4096), (5632, 1024, 4096), (64, 1024, 4096), (200, 2048, 384), (1, 64, 128), (129, 8, 256)]


def _operands(rows: int, k: int, inter: int):
    generator = torch.Generator(device="cuda").manual_seed(rows * 7 + k + inter)
    x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16, generator=generator)
    w = torch.randn(2 * inter, k, device="cuda", dtype=torch.bfloat16, generator=generator) / k ** 0.5
    return x, w


def _expected(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return swiglu_ref(F.linear(x, w))


def _assert_close(out: torch.Tensor, expected: torch.Tensor) -> None:
    # gate and up each round one fp32 sum to bf16, in another order than cuBLAS's: ~2 ulp, and the
    # product carries both.
    torch.testing.assert_close(out.float(), expected.float(), rtol=3.2e-2, atol=3.2e-2)


def test_the_library_has_the_kernel_on_hopper():
    assert gate_up_sm90.available(torch.empty(256, 64, device="cuda", dtype=torch.bfloat16))


@pytest.mark.parametrize("schedule", sorted(gate_up_sm90.SCHEDULES.values()))
@pytest.mark.parametrize("shape", SHAPES)
def test_fused_matches_gemm_then_swiglu(shape, schedule):
    x, w = _operands(*shape)
    out = gate_up_sm90.fused(x, gate_up_sm90.interleave(w), schedule)
    assert out.shape == (shape[0], shape[2])
    _assert_close(out, _expected(x, w))


def test_every_output_column_comes_from_its_own_gate_and_up_rows():
    # One-hot inputs and a weight whose rows are distinct constants: each output element then names
    # exactly which gate and up rows the kernel paired, so a mix-up of columns cannot cancel out.
    inter, k = 512, 64
    x = torch.zeros(256, k, device="cuda", dtype=torch.bfloat16)
    x[torch.arange(256), torch.arange(256) % k] = 1
    gate = torch.linspace(0.5, 2.0, inter, device="cuda").unsqueeze(1).expand(inter, k)
    up = torch.linspace(-1.0, 1.0, inter, device="cuda").unsqueeze(1).expand(inter, k)
    w = torch.cat((gate, up)).to(torch.bfloat16).contiguous()
    for schedule in gate_up_sm90.SCHEDULES.values():
        torch.testing.assert_close(gate_up_sm90.fused(x, gate_up_sm90.interleave(w), schedule).float(),
                                   _expected(x, w).float(), rtol=0, atol=1e-2)


def test_fused_replays_in_a_cuda_graph():
    x, w = _operands(1408, 1024, 4096)
    interleaved = gate_up_sm90.interleave(w)
    gate_up_sm90.fused(x, interleaved)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = gate_up_sm90.fused(x, interleaved)
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    _assert_close(out, _expected(x, w))


def test_timed_choice_is_used_untimed_shapes_stay_unfused():
    x, w = _operands(1400, 1024, 4096)  # a row count no other test times
    interleaved = gate_up_sm90.interleave(w)
    assert gate_up_sm90.choice(x, w, interleaved) == "untimed"
    _assert_close(gate_up_sm90.gate_up_swiglu(x, w, interleaved), _expected(x, w))
    assert gate_up_sm90.choice(x, w, interleaved) == "untimed", "timed outside tuning()"
    with lt_gemm.tuning():
        out = gate_up_sm90.gate_up_swiglu(x, w, interleaved)
    assert gate_up_sm90.choice(x, w, interleaved) in ("unfused", *gate_up_sm90.SCHEDULES)
    _assert_close(out, _expected(x, w))
    _assert_close(gate_up_sm90.gate_up_swiglu(x, w, interleaved), _expected(x, w))


def test_few_rows_and_switched_off_stay_unfused(monkeypatch):
    x, w = _operands(64, 1024, 4096)
    interleaved = gate_up_sm90.interleave(w)
    assert gate_up_sm90.choice(x, w, interleaved) == "unfused"  # below MIN_ROWS
    x, w = _operands(1408, 1024, 4096)
    monkeypatch.setenv("VOXCPM_SM90_GATE_UP", "0")
    assert gate_up_sm90.choice(x, w, interleaved) == "unfused"
    assert not gate_up_sm90.available(w)


def test_bad_operands_are_refused_with_a_clear_error():
    x, w = _operands(1408, 1024, 4096)
    interleaved = gate_up_sm90.interleave(w)
    with pytest.raises(ValueError, match="bf16"):
        gate_up_sm90.fused(x.half(), interleaved.half())
    with pytest.raises(ValueError, match="contiguous"):
        gate_up_sm90.fused(x[:, :512], interleaved[:, :512])
    with pytest.raises(ValueError, match="schedule"):
        gate_up_sm90.fused(x, interleaved, 7)


def test_locdit_stack_with_the_fused_mlp_matches_the_unfused_one(monkeypatch):
    from tests.gpu.test_graph_runner import slim_voxcpm2
    from voxcpm_triton.model.fast_path import enable_custom_ops, enable_sm90_gate_up

    model = slim_voxcpm2(torch.bfloat16)
    enable_custom_ops(model, True)
    assert enable_sm90_gate_up(model, True) > 0
    decoder = model.feat_decoder.estimator.decoder
    x = torch.randn(128, 11, decoder.config.hidden_size, device="cuda", dtype=torch.bfloat16)  # 64 streams
    with lt_gemm.tuning():
        fused, _ = decoder(x, causal=False)
    monkeypatch.setenv("VOXCPM_SM90_GATE_UP", "0")
    unfused, _ = decoder(x, causal=False)
    # Two layers of bf16 roundings in different places: compare against the output's scale.
    assert (fused.float() - unfused.float()).abs().max().item() <= 2e-2 * unfused.float().abs().max().item()
    assert enable_sm90_gate_up(model, False) == 0
    assert all(layer.mlp.gate_up_interleaved is None for layer in decoder.layers)
