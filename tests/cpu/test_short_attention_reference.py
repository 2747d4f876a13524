"""short_attention's PyTorch reference (the CPU path) against the path it replaces in the model
(apply_rope on q and k, then scaled_dot_product_attention with grouped-query heads), against a naive
float64 softmax, its validation messages and its custom-op plumbing."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tests.cpu.tiny_reference import tiny_config_dict
from voxcpm_triton import ops
from voxcpm_triton.config import parse_config
from voxcpm_triton.model.rope import LongRoPE, apply_rope


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def longrope_tables(seq_len: int) -> tuple[torch.Tensor, torch.Tensor, int]:
    """LocDiT's LongRoPE tables of the tiny VoxCPM2 config (head_dim 16)."""
    config = parse_config(tiny_config_dict("voxcpm2")).dit_lm
    rope = LongRoPE(config, max_positions=seq_len + 3)  # longer than the sequence: rows 0..T-1 are used
    return rope.cos_table, rope.sin_table, config.head_dim


def sdpa_path(qkv: torch.Tensor, seq_len: int, q_heads: int, kv_heads: int, cos: torch.Tensor | None,
              sin: torch.Tensor | None, causal: bool) -> torch.Tensor:
    """What Attention.forward computes between the qkv GEMM and o_proj without the op."""
    tokens, width = qkv.shape
    d = width // (q_heads + 2 * kv_heads)
    heads = qkv.view(tokens // seq_len, seq_len, q_heads + 2 * kv_heads, d).transpose(1, 2)
    q, k, v = heads.split((q_heads, kv_heads, kv_heads), dim=1)
    if cos is not None:
        q, k = apply_rope(q, cos[:seq_len], sin[:seq_len]), apply_rope(k, cos[:seq_len], sin[:seq_len])
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    return out.transpose(1, 2).reshape(tokens, q_heads * d)


@pytest.mark.parametrize("causal", (False, True))
@pytest.mark.parametrize("seq_len", (1, 5, 11, 32))
def test_reference_equals_rope_and_sdpa_in_fp32(seq_len, causal):
    cos, sin, d = longrope_tables(seq_len)
    q_heads, kv_heads, sequences = 4, 2, 3
    qkv = torch.randn(sequences * seq_len, (q_heads + 2 * kv_heads) * d, generator=gen(seq_len)) * 2
    out = ops.short_attention(qkv, seq_len, q_heads, kv_heads, cos, sin, causal=causal)
    assert out.shape == (sequences * seq_len, q_heads * d) and out.is_contiguous()
    torch.testing.assert_close(out, sdpa_path(qkv, seq_len, q_heads, kv_heads, cos, sin, causal), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("rope", (True, False))
def test_reference_equals_rope_and_sdpa_in_bf16(rope):
    seq_len, q_heads, kv_heads = 11, 8, 2
    cos, sin, d = longrope_tables(seq_len)
    if not rope:
        cos = sin = None
    qkv = (torch.randn(4 * seq_len, (q_heads + 2 * kv_heads) * d, generator=gen(20)) * 2).to(torch.bfloat16)
    out = ops.short_attention(qkv, seq_len, q_heads, kv_heads, cos, sin)
    assert out.dtype == torch.bfloat16
    # Both round q and k identically; they differ in where the weighted sum is rounded: one bf16 ulp.
    torch.testing.assert_close(out.float(), sdpa_path(qkv, seq_len, q_heads, kv_heads, cos, sin, False).float(),
                               rtol=1.6e-2, atol=1.6e-2)


def test_reference_matches_naive_float64_softmax_with_grouped_heads():
    seq_len, q_heads, kv_heads, d, sequences = 6, 6, 2, 8, 2
    qkv = torch.randn(sequences * seq_len, (q_heads + 2 * kv_heads) * d, generator=gen(30))
    out = ops.short_attention(qkv, seq_len, q_heads, kv_heads, scale=0.3)
    x = qkv.double().view(sequences, seq_len, q_heads + 2 * kv_heads, d)
    expected = torch.zeros(sequences, seq_len, q_heads, d, dtype=torch.float64)
    for n in range(sequences):
        for h in range(q_heads):
            kv = h // (q_heads // kv_heads)
            keys, values = x[n, :, q_heads + kv], x[n, :, q_heads + kv_heads + kv]
            for t in range(seq_len):
                scores = [float(x[n, t, h] @ keys[j]) * 0.3 for j in range(seq_len)]
                top = max(scores)
                weights = torch.tensor([math.exp(s - top) for s in scores], dtype=torch.float64)
                expected[n, t, h] = (weights[:, None] * values).sum(0) / weights.sum()
    torch.testing.assert_close(out.double(), expected.view(sequences * seq_len, -1), rtol=1e-6, atol=1e-6)


def test_custom_op_schema_and_fake_implementation():
    cos, sin, d = longrope_tables(5)
    qkv = torch.randn(2 * 5, 8 * d, generator=gen(40))
    scale = torch.rand(2 * 5, generator=gen(41)) + 0.5
    x = torch.randn(2 * 5, 48, generator=gen(42))
    for args in ((qkv, 5, 4, 2, cos, sin, 0.25, False, None, None, 1e-6),
                 (qkv, 5, 6, 1, None, None, 0.25, True, None, None, 1e-6),
                 (qkv, 5, 4, 2, cos, sin, 0.25, False, scale, None, 1e-6),
                 (qkv, 5, 4, 2, cos, sin, 0.25, False, None, x, 1e-5)):
        torch.library.opcheck(torch.ops.voxcpm.short_attention, args,
                              test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seq_len": 33}, r"seq_len must be in \[1, 32\]"),
        ({"seq_len": 0}, r"seq_len must be in \[1, 32\]"),
        ({"kv_heads": 3}, "q_heads must be a positive multiple of kv_heads"),
        ({"qkv": torch.randn(64, 10)[:, :8]}, "qkv must be a contiguous"),
        ({"qkv": torch.randn(10, 8 * 16)}, "rows must be whole sequences"),
        ({"qkv": torch.randn(8, 8 * 16 + 8)}, r"width must be \(q_heads \+ 2 \* kv_heads\)"),
        ({"cos": None}, "cos and sin must both be given"),
        ({"cos": torch.ones(3, 16), "sin": torch.ones(3, 16)}, r"cos must be contiguous float32 \[>= 4, 16\]"),
        ({"sin": torch.ones(8, 16, dtype=torch.float64)}, r"sin must be contiguous float32"),
    ],
)
def test_validation_names_the_bad_argument(kwargs, message):
    args = {"qkv": torch.randn(8, 8 * 16), "seq_len": 4, "q_heads": 4, "kv_heads": 2, "cos": torch.ones(8, 16),
            "sin": torch.zeros(8, 16)}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        ops.short_attention(**args)


@pytest.mark.parametrize("variant", ("voxcpm2", "voxcpm1.5"))
def test_locdit_and_locenc_use_the_op_with_custom_ops_and_keep_their_outputs(monkeypatch, variant):
    from voxcpm_triton.model.fast_path import enable_custom_ops
    from voxcpm_triton.model.voxcpm import build_model

    torch.manual_seed(0)
    model = build_model(parse_config(tiny_config_dict(variant))).eval()
    dit, config = model.feat_decoder.estimator, model.config
    g = gen(50)
    x = torch.randn(3, config.patch_size, config.feat_dim, generator=g)
    mu = torch.randn(3, dit.decoder.config.hidden_size * (2 if dit.version == 2 else 1), generator=g)
    t, dt = torch.rand(3, generator=g), torch.full((3,), 0.1)
    cond = torch.randn(3, config.patch_size, config.feat_dim, generator=g)
    patches = torch.randn(2, 3, config.patch_size, config.feat_dim, generator=g)
    with torch.inference_mode():
        plain = dit(x, mu, t, cond, dt), model.feat_encoder(patches)
        calls, original = [], ops.short_attention
        monkeypatch.setattr(ops, "short_attention", lambda *a, **k: calls.append(a[1]) or original(*a, **k))
        enable_custom_ops(model, True)
        try:
            fused = dit(x, mu, t, cond, dt), model.feat_encoder(patches)
        finally:
            enable_custom_ops(model, False)
    layers = len(dit.decoder.layers) + len(model.feat_encoder.encoder.layers)
    assert len(calls) == layers and set(calls) == {dit_len(dit, config.patch_size), config.patch_size + 1}
    for ours, expected in zip(fused, plain):
        torch.testing.assert_close(ours, expected, rtol=1e-5, atol=1e-5)


def dit_len(dit, patch_size: int) -> int:
    return (3 if dit.version == 2 else 1) + 2 * patch_size


@pytest.mark.parametrize("custom_ops", (False, True))
def test_last_layer_rows_equal_the_full_stack_sliced(custom_ops):
    from voxcpm_triton.model.fast_path import enable_custom_ops
    from voxcpm_triton.model.voxcpm import build_model

    torch.manual_seed(1)
    model = build_model(parse_config(tiny_config_dict("voxcpm2"))).eval()
    stack = model.feat_decoder.estimator.decoder
    x = torch.randn(3, 11, stack.config.hidden_size, generator=gen(60))
    enable_custom_ops(model, custom_ops)
    try:
        with torch.inference_mode():
            full, _ = stack(x, causal=False)
            last4, _ = stack(x, causal=False, rows=slice(7, None))
            with pytest.raises(ValueError, match="non-causal attention only"):
                stack(x, causal=True, rows=slice(7, None))
    finally:
        enable_custom_ops(model, False)
    assert last4.shape == (3, 4, stack.config.hidden_size)
    torch.testing.assert_close(last4, full[:, 7:], rtol=1e-5, atol=1e-5)
