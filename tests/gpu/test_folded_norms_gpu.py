"""RMSNorm weights folded into the next GEMM (fast_path.enable_folded_norms) on the GPU: the row_scale
kernel, short_attention's and the Hopper gate_up kernel's row scale against their references (and
short_attention's own statistic bit for bit against the row_scale kernel's), the
in-place cuBLASLt add, and a VoxCPM2-shaped LocDiT stack of 1408 rows (64 streams) with the fold
against its float32 twin, eagerly and replayed in a CUDA graph.

Tolerances: row_scale is one fp32 sum per row (1e-5 relative); short_attention with a row scale as
tests/gpu/test_short_attention_gpu.py (the kernel scales q, k and v in fp32 where the reference
rounds the scaled rows first: within the same bound); gate_up as test_gate_up_sm90_gpu.py."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from tests.gpu.op_checks import DEVICE, close, randn
from tests.gpu.test_short_attention_gpu import longrope_like_tables, make_qkv
from voxcpm_triton import ops
from voxcpm_triton.model.fast_path import enable_custom_ops, enable_folded_norms
from voxcpm_triton.model.local_dit import LocalDiT
from voxcpm_triton.model.rms_norm import RMSNorm
from voxcpm_triton.ops import gate_up_sm90, lt_gemm

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.usefixtures("no_tf32"),
]


def _on_hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def _row_scales(rows: int, seed: int) -> torch.Tensor:
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    return torch.rand(rows, generator=g, device=DEVICE) * 1.5 + 0.25


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16, torch.float32))
@pytest.mark.parametrize(("rows", "hidden"), ((1, 1024), (1408, 1024), (5632, 1024), (7, 1000), (33, 5)))
def test_row_scale_kernel_matches_reference(dtype, rows, hidden):
    x = randn(rows, hidden, dtype=dtype, seed=rows + hidden, scale=3.0)
    out = ops.row_scale(x, 1e-6)
    assert out.shape == (rows,) and out.dtype == torch.float32
    torch.testing.assert_close(out, ops.row_scale_ref(x, 1e-6), rtol=1e-5, atol=0)


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16, torch.float32))
@pytest.mark.parametrize("rope", (True, False))
@pytest.mark.parametrize(("sequences", "seq_len"), ((1, 11), (128, 11), (512, 11), (37, 5), (3, 32)))
def test_short_attention_row_scale_matches_reference(dtype, rope, sequences, seq_len):
    q_heads, kv_heads, head_dim = 16, 2, 128
    qkv = make_qkv(sequences, seq_len, q_heads, kv_heads, head_dim, dtype, seed=sequences + seq_len)
    cos, sin = longrope_like_tables(seq_len, head_dim) if rope else (None, None)
    scale = _row_scales(sequences * seq_len, seed=seq_len)
    out = ops.short_attention(qkv, seq_len, q_heads, kv_heads, cos, sin, row_scale=scale)
    expected = ops.short_attention_ref(qkv, seq_len, q_heads, kv_heads, cos, sin, row_scale=scale)
    close(out, expected, dtype)
    # The scale changes the result (a kernel ignoring it would fail here).
    assert not torch.allclose(out.float(), ops.short_attention(qkv, seq_len, q_heads, kv_heads, cos, sin).float(),
                              atol=0.1, rtol=0.1)


@pytest.mark.parametrize("dtype", (torch.bfloat16, torch.float16, torch.float32))
@pytest.mark.parametrize(("sequences", "seq_len", "hidden"),
                         ((1, 11, 1024), (128, 11, 1024), (37, 5, 1001), (3, 32, 64)))
def test_short_attention_computes_the_row_scale_as_the_row_scale_kernel(dtype, sequences, seq_len, hidden):
    # Bit for bit: the kernel sums each row in row_scale's order (hidden 1001: its element-wise order).
    q_heads, kv_heads, head_dim = 16, 2, 128
    qkv = make_qkv(sequences, seq_len, q_heads, kv_heads, head_dim, dtype, seed=sequences + hidden)
    cos, sin = longrope_like_tables(seq_len, head_dim)
    x = randn(sequences * seq_len, hidden, dtype=dtype, seed=hidden, scale=3.0)
    given = ops.short_attention(qkv, seq_len, q_heads, kv_heads, cos, sin, row_scale=ops.row_scale(x, 1e-5))
    computed = ops.short_attention(qkv, seq_len, q_heads, kv_heads, cos, sin, norm_input=x, norm_eps=1e-5)
    assert torch.equal(computed, given)


def test_short_attention_row_scale_from_the_gemms_input_in_a_cuda_graph():
    # As the folded layer runs it: the qkv GEMM reads x, short_attention (launched as its programmatic
    # dependent) reads x again for the statistic, replayed with new rows in the static input.
    sequences, seq_len, q_heads, kv_heads, head_dim, hidden = 128, 11, 16, 2, 128, 1024
    weight = randn((q_heads + 2 * kv_heads) * head_dim, hidden, dtype=torch.bfloat16, seed=3, scale=0.03)
    cos, sin = longrope_like_tables(seq_len, head_dim)
    x = randn(sequences * seq_len, hidden, dtype=torch.bfloat16, seed=4)

    def layer() -> torch.Tensor:
        qkv = ops.linear(x, weight)
        return ops.short_attention(qkv, seq_len, q_heads, kv_heads, cos, sin, norm_input=x, norm_eps=1e-6)

    layer()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = layer()
    for seed in (5, 6):
        x.copy_(randn(sequences * seq_len, hidden, dtype=torch.bfloat16, seed=seed, scale=seed - 3.0))
        graph.replay()
        expected = ops.short_attention(ops.linear(x, weight), seq_len, q_heads, kv_heads, cos, sin,
                                       row_scale=ops.row_scale(x, 1e-6))
        assert torch.equal(out, expected)


@pytest.mark.skipif(not _on_hopper(), reason="needs an sm_90 GPU")
@pytest.mark.parametrize("schedule", sorted(gate_up_sm90.SCHEDULES.values()))
@pytest.mark.parametrize(("rows", "k", "inter"), ((1408, 1024, 4096), (5632, 1024, 4096), (129, 8, 256)))
def test_gate_up_row_scale_matches_reference(schedule, rows, k, inter):
    x = randn(rows, k, dtype=torch.bfloat16, seed=rows + k)
    w = randn(2 * inter, k, dtype=torch.bfloat16, seed=inter, scale=k ** -0.5)
    interleaved = gate_up_sm90.interleave(w)
    scale = _row_scales(rows, seed=k)
    out = gate_up_sm90.fused(x, interleaved, schedule, scale)
    torch.testing.assert_close(out.float(), gate_up_sm90.gate_up_swiglu_ref(x, interleaved, scale).float(),
                               rtol=3.2e-2, atol=3.2e-2)


@pytest.mark.parametrize(("rows", "k", "n"), ((1408, 2048, 1024), (1408, 4096, 1024), (5632, 4096, 1024)))
def test_in_place_cublaslt_add_matches_linear_then_add(rows, k, n):
    x = randn(rows, k, dtype=torch.bfloat16, seed=k)
    w = randn(n, k, dtype=torch.bfloat16, seed=n, scale=k ** -0.5)
    start = randn(rows, n, dtype=torch.bfloat16, seed=rows, scale=4.0)
    expected = (start.float() + 0.4 * torch.nn.functional.linear(x.float(), w.float())).to(torch.bfloat16)
    out = start.clone()
    with lt_gemm.tuning():
        taken = lt_gemm.linear_add_(x, w, out, 0.4)
    if taken:  # else F.linear + add timed faster and out is untouched: the caller adds
        close(out, expected, torch.bfloat16)
    else:
        assert torch.equal(out, start)


def _locdit_stack(dtype: torch.dtype) -> LocalDiT:
    from voxcpm_triton.checkpoint.make import config_dict
    from voxcpm_triton.config import parse_config

    config = parse_config(config_dict("voxcpm2", "full"))
    torch.manual_seed(0)
    with torch.device(DEVICE):
        dit = LocalDiT(dataclasses.replace(config.dit_lm, num_hidden_layers=2), config.feat_dim, config.patch_size, 2)
        for module in dit.modules():
            if isinstance(module, RMSNorm):
                module.weight.data = torch.rand(module.weight.shape, device=DEVICE) + 0.5
    return dit.to(dtype).eval()


@pytest.mark.skipif(not _on_hopper(), reason="needs an sm_90 GPU")
@torch.no_grad()
def test_folded_locdit_stack_at_64_streams_against_float32():
    exact_stack = _locdit_stack(torch.float32)
    x = randn(128, 11, exact_stack.hidden_size, dtype=torch.float32, seed=9, scale=2.0)
    exact, _ = exact_stack.decoder(x, causal=False, rows=slice(7, None))
    dit = _locdit_stack(torch.bfloat16)
    enable_custom_ops(dit, True)
    with lt_gemm.tuning():
        normed, _ = dit.decoder(x.to(torch.bfloat16), causal=False, rows=slice(7, None))
        assert enable_folded_norms(dit, True) > 0
        assert dit.decoder._folded_norms_take(x)
        folded, _ = dit.decoder(x.to(torch.bfloat16), causal=False, rows=slice(7, None))
    scale = exact.abs().max().item()
    normed_error = (normed.float() - exact).abs().max().item()
    folded_error = (folded.float() - exact).abs().max().item()
    print(f"|normed - fp32| {normed_error:.4g}, |folded - fp32| {folded_error:.4g}, scale {scale:.3g}")
    assert folded_error < max(1.5 * normed_error, 1e-2 * scale)

    # Replayed in a CUDA graph (the engine's way): bit-identical to the eager call on new inputs.
    static = x.to(torch.bfloat16)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        dit.decoder(static, causal=False, rows=slice(7, None))
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        replayed, _ = dit.decoder(static, causal=False, rows=slice(7, None))
    fresh = randn(128, 11, exact_stack.hidden_size, dtype=torch.bfloat16, seed=10, scale=2.0)
    static.copy_(fresh)
    graph.replay()
    assert torch.equal(replayed, dit.decoder(fresh, causal=False, rows=slice(7, None))[0])
