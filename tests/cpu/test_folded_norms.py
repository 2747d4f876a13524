"""RMSNorm weights folded into the next GEMM's weight (fast_path.enable_folded_norms) on the CPU, where
every op runs its reference: the identity the fold rests on (rmsnorm(x) * w @ W^T = (x @ (W diag w)^T)
* row_scale(x)) for short_attention and the gate_up SwiGLU, the LocDiT stack with and without the
fold against its float32 twin, when the folded path is taken, and what turning it off restores."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from tests.cpu.tiny_reference import tiny_config_dict
from voxcpm_triton import ops
from voxcpm_triton.config import parse_config
from voxcpm_triton.model import minicpm
from voxcpm_triton.model.fast_path import (enable_custom_ops, enable_folded_norms, enable_folded_statistics,
                                           enable_fp8, folded_copy_bytes)
from voxcpm_triton.model.rms_norm import RMSNorm
from voxcpm_triton.model.voxcpm import build_model
from voxcpm_triton.ops import gate_up_sm90, lt_gemm
from voxcpm_triton.ops.rmsnorm import rmsnorm_ref
from voxcpm_triton.ops.swiglu import swiglu_ref

EPS = 1e-5


def _norm_weight(hidden: int, seed: int) -> torch.Tensor:
    return torch.rand(hidden, generator=torch.Generator().manual_seed(seed)) + 0.5


def test_row_scale_is_the_rmsnorm_statistic():
    x = torch.randn(6, 5, 48) * 3
    weight = _norm_weight(48, 1)
    s = ops.row_scale(x, EPS)
    assert s.shape == (6, 5) and s.dtype == torch.float32
    torch.testing.assert_close(x * s.unsqueeze(-1) * weight, rmsnorm_ref(x, weight, EPS))
    half = x.to(torch.bfloat16)
    torch.testing.assert_close(ops.row_scale(half, EPS), ops.row_scale_ref(half.float(), EPS))


@pytest.mark.parametrize(("x", "eps", "match"), [
    (torch.randn(4, 8).t(), EPS, "contiguous"),
    (torch.randn(2, 16385), EPS, "hidden size"),
    (torch.randn(2, 8, dtype=torch.float64), EPS, "must be one of"),
    (torch.randn(2, 8), 0.0, "eps"),
])
def test_row_scale_rejects_bad_arguments(x, eps, match):
    with pytest.raises(ValueError, match=match):
        ops.row_scale(x, eps)


def test_short_attention_with_folded_qkv_equals_attention_of_normed_rows():
    sequences, length, hidden, heads, kv_heads, head_dim = 3, 11, 48, 4, 2, 16
    g = torch.Generator().manual_seed(2)
    x = torch.randn(sequences * length, hidden, generator=g) * 2
    w = torch.randn((heads + 2 * kv_heads) * head_dim, hidden, generator=g) / hidden ** 0.5
    norm = _norm_weight(hidden, 3)
    cos, sin = torch.rand(length, head_dim, generator=g), torch.rand(length, head_dim, generator=g)
    expected = ops.short_attention_ref(F.linear(rmsnorm_ref(x, norm, EPS), w), length, heads, kv_heads, cos, sin)
    folded = ops.short_attention(F.linear(x, w * norm), length, heads, kv_heads, cos, sin,
                                 row_scale=ops.row_scale(x, EPS))
    torch.testing.assert_close(folded, expected, rtol=1e-5, atol=1e-5)
    # The statistic computed by the op from the norm's input rows: the same numbers.
    computed = ops.short_attention(F.linear(x, w * norm), length, heads, kv_heads, cos, sin, norm_input=x,
                                   norm_eps=EPS)
    assert torch.equal(computed, folded)


def test_short_attention_rejects_a_row_scale_of_the_wrong_shape():
    qkv = torch.randn(22, 8 * 16)
    with pytest.raises(ValueError, match="row_scale"):
        ops.short_attention(qkv, 11, 4, 2, row_scale=torch.ones(11))
    with pytest.raises(ValueError, match="row_scale"):
        ops.short_attention(qkv, 11, 4, 2, row_scale=torch.ones(22, dtype=torch.float64))


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"norm_input": torch.ones(22, 48), "row_scale": torch.ones(22)}, "row_scale or norm_input, not both"),
    ({"norm_input": torch.ones(11, 48)}, r"norm_input must be contiguous torch.float32 \[22, hidden"),
    ({"norm_input": torch.ones(22, 48, dtype=torch.float64)}, "norm_input must be contiguous torch.float32"),
    ({"norm_input": torch.ones(48, 22).t()}, "norm_input must be contiguous"),
])
def test_short_attention_rejects_a_bad_norm_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ops.short_attention(torch.randn(22, 8 * 16), 11, 4, 2, **kwargs)


def test_the_gate_up_kernel_rejects_a_row_scale_of_the_wrong_shape():
    x = torch.zeros(4, 8, dtype=torch.bfloat16)
    interleaved = torch.zeros(gate_up_sm90.WEIGHT_ROWS, 8, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="row_scale"):
        gate_up_sm90.fused(x, interleaved, row_scale=torch.ones(3))
    with pytest.raises(ValueError, match="row_scale"):
        gate_up_sm90.fused(x, interleaved, row_scale=torch.ones(4, dtype=torch.float64))


def test_gate_up_with_folded_weight_equals_swiglu_of_normed_rows():
    rows, hidden, inter = 40, 48, 128
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(rows, hidden, generator=g) * 2).to(torch.bfloat16)
    w = (torch.randn(2 * inter, hidden, generator=g) / hidden ** 0.5).to(torch.bfloat16)
    norm = _norm_weight(hidden, 5).to(torch.bfloat16)
    expected = swiglu_ref(F.linear(rmsnorm_ref(x.float(), norm.float(), EPS), w.float()))
    folded_weight = gate_up_sm90.interleave((w.float() * norm.float()).to(torch.bfloat16))
    out = gate_up_sm90.scaled(x, folded_weight, ops.row_scale(x, EPS))
    assert out.shape == (rows, inter) and out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expected, rtol=3e-2, atol=3e-2)  # bf16 operands, each rounded


def _dit_model(dtype: torch.dtype):
    config = tiny_config_dict("voxcpm2")
    config["dit_config"]["ffn_dim"] = 128  # gate_up rows a multiple of the interleaved kernel's tile
    torch.manual_seed(0)
    model = build_model(parse_config(config)).eval()
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, RMSNorm):  # norm weights far from 1, or the fold proves nothing
                module.weight.copy_(torch.rand(module.weight.shape) + 0.5)
    return model.to(dtype)


@pytest.fixture
def low_threshold(monkeypatch):
    monkeypatch.setattr(minicpm, "FOLDED_NORMS_MIN_ROWS", 8 * 11)


@torch.no_grad()
@pytest.mark.parametrize(("statistic_max_rows", "per_layer"), [
    (8 * 11, ["computed", "row_scale"]),  # short_attention computes the input norm's statistic
    (8 * 11 - 1, ["row_scale", "given", "row_scale"]),  # above the limit: row_scale before the qkv GEMM
])
def test_the_folded_locdit_stack_is_as_close_to_float32_as_the_normed_one(low_threshold, monkeypatch,
                                                                          statistic_max_rows, per_layer):
    monkeypatch.setattr(minicpm, "ATTENTION_STATISTIC_MAX_ROWS", statistic_max_rows)
    stack = _dit_model(torch.float32).feat_decoder.estimator.decoder
    x = torch.randn(8, 11, stack.config.hidden_size, generator=torch.Generator().manual_seed(6)) * 2
    exact, _ = stack(x, causal=False, rows=slice(7, None))
    model = _dit_model(torch.bfloat16)
    enable_custom_ops(model, True)
    stack = model.feat_decoder.estimator.decoder
    normed, _ = stack(x.to(torch.bfloat16), causal=False, rows=slice(7, None))
    assert enable_folded_norms(model, True, need_kernel=False) > 0
    calls = []
    monkeypatch.setattr(ops, "row_scale", lambda *args: calls.append("row_scale") or ops.row_scale_ref(*args))
    attention = ops.short_attention

    def short_attention(*args, **kwargs):
        calls.append("computed" if kwargs.get("norm_input") is not None
                     else "given" if kwargs.get("row_scale") is not None else "unscaled")
        return attention(*args, **kwargs)

    monkeypatch.setattr(ops, "short_attention", short_attention)
    folded, _ = stack(x.to(torch.bfloat16), causal=False, rows=slice(7, None))
    assert calls == per_layer * len(stack.layers)  # the folded path ran, its attention statistic as asked
    assert folded.shape == normed.shape == exact.shape
    scale = exact.abs().max().item()
    normed_error = (normed.float() - exact).abs().max().item()
    folded_error = (folded.float() - exact).abs().max().item()
    assert folded_error < max(2 * normed_error, 1e-2 * scale), (folded_error, normed_error)
    enable_folded_norms(model, False)
    assert torch.equal(stack(x.to(torch.bfloat16), causal=False, rows=slice(7, None))[0], normed)


def test_the_two_folded_locdit_paths_share_one_qkv_copy():
    model = _dit_model(torch.bfloat16)
    enable_custom_ops(model, True)
    layer = model.feat_decoder.estimator.decoder.layers[0]
    enable_folded_norms(model, True, need_kernel=False)
    qkv = layer.self_attn.folded_qkv
    enable_folded_statistics(model, lms=False, encoder=False, dit=True)
    assert layer.self_attn.folded_qkv is qkv and layer.mlp.folded_plain_gate_up is not None  # made once
    layers = model.feat_decoder.estimator.decoder.layers
    each = layer.self_attn.folded_qkv.nbytes + layer.mlp.folded_gate_up.nbytes + layer.mlp.folded_plain_gate_up.nbytes
    assert folded_copy_bytes(model) == len(layers) * each  # the shared copy counted once
    enable_folded_norms(model, False)
    assert layer.self_attn.folded_qkv is qkv and layer.mlp.folded_gate_up is None  # the plain path reads it
    enable_folded_statistics(model, lms=False, encoder=False, dit=False)
    assert layer.self_attn.folded_qkv is None and layer.mlp.folded_plain_gate_up is None
    assert folded_copy_bytes(model) == 0


@torch.no_grad()
def test_fewer_rows_or_fp8_copies_keep_the_normed_path(low_threshold):
    model = _dit_model(torch.bfloat16)
    enable_custom_ops(model, True)
    enable_folded_norms(model, True, need_kernel=False)
    stack = model.feat_decoder.estimator.decoder
    hidden = stack.config.hidden_size
    assert stack._folded_norms_take(torch.zeros(8, 11, hidden, dtype=torch.bfloat16))
    assert not stack._folded_norms_take(torch.zeros(7, 11, hidden, dtype=torch.bfloat16))
    enable_folded_statistics(model, lms=False, encoder=False, dit=True)
    assert stack._folded_plain_takes(torch.zeros(7, 11, hidden, dtype=torch.bfloat16))
    enable_fp8(model, True, min_rows=1)
    assert not stack._folded_norms_take(torch.zeros(8, 11, hidden, dtype=torch.bfloat16))
    assert not stack._folded_plain_takes(torch.zeros(7, 11, hidden, dtype=torch.bfloat16))


def test_only_the_locdit_gets_folded_weights_and_not_without_the_kernel():
    model = _dit_model(torch.bfloat16)
    enable_custom_ops(model, True)
    assert enable_folded_norms(model, True) == 0  # the CPU has no Hopper gate_up kernel
    held = enable_folded_norms(model, True, need_kernel=False)
    folded = {name for name, module in model.named_modules() if getattr(module, "folded_qkv", None) is not None
              or getattr(module, "folded_gate_up", None) is not None}
    layers = len(model.feat_decoder.estimator.decoder.layers)
    assert len(folded) == 2 * layers and all(name.startswith("feat_decoder.estimator.") for name in folded)
    assert held == sum(p.nbytes for layer in model.feat_decoder.estimator.decoder.layers
                       for p in (layer.self_attn.qkv_weight, layer.mlp.gate_up_weight))


def test_the_in_place_cublaslt_add_declines_off_the_gpu():
    x, w, out = torch.randn(128, 16), torch.randn(8, 16), torch.zeros(128, 8)
    assert not lt_gemm.linear_add_(x, w, out, 0.5)
    assert torch.equal(out, torch.zeros(128, 8))
