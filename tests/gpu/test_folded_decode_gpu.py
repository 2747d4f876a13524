"""Folded norm weights whose statistic the next kernel computes (fast_path.enable_folded_statistics)
on the GPU: rope_kv_write and swiglu computing a folded RMSNorm's row statistic from its input rows
(norm_input) against their references; the LM stacks' decode of 48 rows (more than skinny_gemm's
normed path takes), LocEnc's 320 rows (64 streams' patches) and the LocDiT's 352 (16 streams) with
folded weights against the same stacks with add_rmsnorm kernels, both in bf16, each measured
against the float32 stack.

Tolerances: the ops as in test_ops_parity (bf16 1.6e-2, fp16 2e-3, fp32 2e-5); the statistic is one
fp32 sum per row in another order than the reference's. The stack: the folded path's error at most
1.5x the add_rmsnorm path's plus 1% of the output's scale (the folded weights are rounded once more)."""

from __future__ import annotations

import pytest
import torch

from tests.gpu.op_checks import DEVICE, close, randn
from tests.gpu.test_normed_layers_gpu import exact_and_fast_models
from tests.gpu.test_ops_parity import rope_tables
from voxcpm_triton import ops
from voxcpm_triton.model.attention import DecodeSlots
from voxcpm_triton.model.fast_path import enable_folded_statistics
from voxcpm_triton.ops import library

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.usefixtures("no_tf32"),
]

DTYPES = (torch.bfloat16, torch.float16, torch.float32)


@pytest.fixture(scope="module", autouse=True)
def kernels_loaded():
    assert library.library() is not None, f"kernels library not loaded ({library.library_status()})"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", (1, 33, 64, 256))
@pytest.mark.parametrize("hidden", (2048, 1000))  # 1000: the statistic's scalar path
def test_swiglu_with_a_norm_input_matches_reference(dtype, rows, hidden):
    gate_up = randn(rows, 2 * 6144, dtype=dtype, seed=70, scale=2.0)
    x = randn(rows, hidden, dtype=dtype, seed=71, scale=3.0)
    close(ops.swiglu(gate_up, x, 1e-6), ops.swiglu_ref(gate_up, x, 1e-6), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_swiglu_with_a_norm_input_and_an_odd_width(dtype):
    gate_up = randn(5, 2 * 1001, dtype=dtype, seed=72)  # the unvectorised element path
    x = randn(5, 2048, dtype=dtype, seed=73)
    close(ops.swiglu(gate_up, x, 1e-5), ops.swiglu_ref(gate_up, x, 1e-5), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("tokens", (1, 64, 256))
@pytest.mark.parametrize("hidden", (2048, 1000))
@pytest.mark.parametrize("rope", (True, False))
def test_rope_kv_write_with_a_norm_input_matches_reference(dtype, tokens, hidden, rope):
    q_heads, kv_heads, head_dim, max_len, slots = 16, 2, 128, 256, tokens + 3
    qkv = randn(tokens, (q_heads + 2 * kv_heads) * head_dim, dtype=dtype, seed=74, scale=2.0)
    q, k, v = (t.view(tokens, -1, head_dim) for t in qkv.split([q_heads * head_dim, kv_heads * head_dim,
                                                                  kv_heads * head_dim], dim=-1))
    x = randn(tokens, hidden, dtype=dtype, seed=75, scale=3.0)
    g = torch.Generator(device=DEVICE).manual_seed(76)
    slot_ids = torch.randperm(slots, generator=g, device=DEVICE)[:tokens].int()
    positions = torch.randint(0, max_len, (tokens,), generator=g, device=DEVICE).int()
    if tokens > 1:
        slot_ids[-1] = -1  # a padding row writes nothing
    cos, sin = rope_tables(max_len, head_dim) if rope else (None, None)
    k_cache = torch.full((slots, kv_heads, max_len, head_dim), float("nan"), device=DEVICE, dtype=dtype)
    v_cache = torch.full_like(k_cache, float("nan"))
    k_ref, v_ref = k_cache.clone(), v_cache.clone()
    expected = ops.rope_kv_write_ref(q, k, v, k_ref, v_ref, positions, slot_ids, cos, sin, x, 1e-6)
    out = ops.rope_kv_write(q, k, v, k_cache, v_cache, positions, slot_ids, cos, sin, x, 1e-6)
    close(out, expected, dtype)
    written = ~torch.isnan(k_ref)
    assert torch.equal(written, ~torch.isnan(k_cache)) and torch.equal(~torch.isnan(v_ref), ~torch.isnan(v_cache))
    close(k_cache[written], k_ref[written], dtype)
    close(v_cache[written], v_ref[written], dtype)


def test_the_ops_with_a_norm_input_replay_in_a_cuda_graph():
    dtype = torch.bfloat16
    gate_up = randn(64, 2 * 6144, dtype=dtype, seed=77)
    x = randn(64, 2048, dtype=dtype, seed=78)
    expected = ops.swiglu(gate_up, x, 1e-6).clone()
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.graph(graph, stream=side):
        out = ops.swiglu(gate_up, x, 1e-6)
    x.copy_(randn(64, 2048, dtype=dtype, seed=79))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, ops.swiglu(gate_up, x, 1e-6)) and not torch.equal(out, expected)


@pytest.fixture(scope="module")
def models() -> tuple[torch.nn.Module, torch.nn.Module]:
    return exact_and_fast_models()


def _decode(lm, x: torch.Tensor, caches: tuple[torch.Tensor, torch.Tensor], positions: torch.Tensor) -> torch.Tensor:
    rows = x.shape[0]
    slots = torch.arange(rows, device=DEVICE)
    index = (slots.int(), positions.int(), positions.int() + 1)
    where = DecodeSlots(slots, positions, caches[0].shape[3], index)
    return lm.decode(x, caches[0].clone(), caches[1].clone(), where)


@pytest.mark.parametrize("name", ("base_lm", "residual_lm"))
def test_the_folded_lm_decode_is_as_close_to_fp32_as_the_add_rmsnorm_path(models, name):
    exact, fast = models
    exact_lm, fast_lm = getattr(exact, name), getattr(fast, name)
    config = exact_lm.config
    rows, max_len = 48, 128
    shape = (config.num_hidden_layers, rows, config.num_key_value_heads, max_len, exact_lm.layers[0].self_attn.head_dim)
    caches = (randn(*shape, dtype=torch.float32, seed=80), randn(*shape, dtype=torch.float32, seed=81))
    positions = torch.randint(1, max_len - 1, (rows,), generator=torch.Generator(device=DEVICE).manual_seed(82),
                              device=DEVICE)
    x = randn(rows, config.hidden_size, dtype=torch.bfloat16, seed=83, scale=2.0)
    reference = _decode(exact_lm, x.float(), caches, positions)
    low = tuple(cache.to(torch.bfloat16) for cache in caches)
    found, outputs = {}, {}
    try:
        for folded in (True, False):
            enable_folded_statistics(fast, lms=folded, encoder=False, dit=False)
            assert fast_lm._folded_statistics_given() == folded
            outputs[folded] = _decode(fast_lm, x, low, positions)
            found[folded] = (outputs[folded].float() - reference).abs().max().item()
    finally:
        enable_folded_statistics(fast, False, False, False)
    assert_as_close(name, found, outputs, reference)


def assert_as_close(name: str, found: dict, outputs: dict, reference: torch.Tensor) -> None:
    assert not torch.equal(outputs[True], outputs[False])  # two paths ran
    scale = reference.abs().max().item()
    print(f"{name}: max |error| folded {found[True]:.3g}, add_rmsnorm {found[False]:.3g}, output scale {scale:.3g}")
    assert found[True] <= 1.5 * found[False] + 0.01 * scale


@pytest.mark.parametrize(("stack", "rows"), (("encoder", None), ("encoder", slice(0, 1)), ("dit", None),
                                           ("dit", slice(7, None))))
def test_folded_short_stacks_are_as_close_to_fp32_as_the_add_rmsnorm_path(models, stack, rows):
    # LocEnc's 64 streams of 5 tokens and the LocDiT's 16 of 2 x 11 (352 rows, below the Hopper path).
    exact, fast = models
    pick = {"encoder": lambda model: model.feat_encoder.encoder,
            "dit": lambda model: model.feat_decoder.estimator.decoder}
    exact_stack, fast_stack = pick[stack](exact), pick[stack](fast)
    shape = (64, 5) if stack == "encoder" else (32, 11)
    x = randn(*shape, exact_stack.config.hidden_size, dtype=torch.bfloat16, seed=84, scale=2.0)
    reference, _ = exact_stack(x.float(), causal=False, rows=rows)
    found, outputs = {}, {}
    try:
        for folded in (True, False):
            enable_folded_statistics(fast, lms=False, encoder=folded, dit=folded)
            assert fast_stack._folded_plain_takes(x) == folded
            outputs[folded], _ = fast_stack(x, causal=False, rows=rows)
            found[folded] = (outputs[folded].float() - reference).abs().max().item()
    finally:
        enable_folded_statistics(fast, False, False, False)
    assert_as_close(stack, found, outputs, reference)
