"""The PyTorch references of voxcpm_triton.ops (the CPU path) against naive float64 formulas, and the
custom-op plumbing (schemas, fake implementations) through torch.library.opcheck on the CPU."""

from __future__ import annotations

import math

import pytest
import torch

from voxcpm_triton import ops
from voxcpm_triton.ops import library


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_cpu_tensors_use_the_reference_path():
    assert not library.kernel_ready(torch.zeros(4))


def test_add_rmsnorm_matches_formula_and_updates_x():
    g = gen(0)
    x = torch.randn(5, 96, generator=g)
    residual = torch.randn(5, 96, generator=g)
    weight = torch.randn(96, generator=g)
    x64 = x.double() + residual.double() * 0.5
    expected = x64 / torch.sqrt((x64**2).mean(-1, keepdim=True) + 1e-5) * weight.double()
    out = ops.add_rmsnorm(x, residual, weight, 1e-5, residual_scale=0.5)
    torch.testing.assert_close(x.double(), x64, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-5)


def test_rmsnorm_leaves_x_unchanged_and_rounds_like_minicpm_in_bf16():
    g = gen(1)
    x = torch.randn(3, 64, generator=g).to(torch.bfloat16)
    weight = torch.randn(64, generator=g).to(torch.bfloat16)
    before = x.clone()
    out = ops.rmsnorm(x, weight, 1e-6)
    assert torch.equal(x, before)
    x64 = x.double()
    normed = (x64 / torch.sqrt((x64**2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16)
    assert torch.equal(out, normed * weight)


def rotate_naive(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    out = torch.empty_like(x, dtype=torch.float64)
    for i in range(half):
        out[..., i] = x[..., i] * cos[..., i] - x[..., i + half] * sin[..., i]
        out[..., i + half] = x[..., i + half] * cos[..., i + half] + x[..., i] * sin[..., i + half]
    return out


def test_rope_kv_write_rotates_and_writes_only_valid_tokens():
    g = gen(2)
    tokens, q_heads, kv_heads, d, slots, max_len = 4, 4, 2, 16, 3, 8
    q = torch.randn(tokens, q_heads, d, generator=g)
    k = torch.randn(tokens, kv_heads, d, generator=g)
    v = torch.randn(tokens, kv_heads, d, generator=g)
    cos = torch.randn(max_len, d, generator=g)
    sin = torch.randn(max_len, d, generator=g)
    positions = torch.tensor([0, 5, 2, 9], dtype=torch.int32)  # token 3 is past the cache
    slot_ids = torch.tensor([2, 0, -1, 1], dtype=torch.int32)  # token 2 is padding
    k_cache = torch.full((slots, kv_heads, max_len, d), 7.0)
    v_cache = torch.full((slots, kv_heads, max_len, d), 7.0)
    q_out = ops.rope_kv_write(q, k, v, k_cache, v_cache, positions, slot_ids, cos, sin)

    table = positions.long().clamp(0, max_len - 1)
    c, s = cos[table].double()[:, None], sin[table].double()[:, None]
    torch.testing.assert_close(q_out.double(), rotate_naive(q.double(), c, s), rtol=1e-6, atol=1e-6)
    k_rot = rotate_naive(k.double(), c, s)
    expected_k = torch.full_like(k_cache, 7.0, dtype=torch.float64)
    expected_v = expected_k.clone()
    for i in (0, 1):
        expected_k[slot_ids[i], :, positions[i]] = k_rot[i]
        expected_v[slot_ids[i], :, positions[i]] = v[i].double()
    torch.testing.assert_close(k_cache.double(), expected_k, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(v_cache.double(), expected_v, rtol=0, atol=0)


def test_rope_kv_write_without_tables_copies():
    g = gen(3)
    q, k, v = (torch.randn(2, h, 8, generator=g) for h in (2, 1, 1))
    k_cache = torch.zeros(2, 1, 4, 8)
    v_cache = torch.zeros(2, 1, 4, 8)
    q_out = ops.rope_kv_write(q, k, v, k_cache, v_cache, torch.tensor([1, 3]), torch.tensor([1, 0]))
    assert torch.equal(q_out, q) and q_out.data_ptr() != q.data_ptr()
    assert torch.equal(k_cache[1, :, 1], k[0]) and torch.equal(v_cache[0, :, 3], v[1])


def test_rope_kv_write_with_a_norm_input_scales_q_k_v_by_its_row_statistic():
    g = gen(21)
    tokens, d, hidden = 3, 8, 20
    q, k, v = (torch.randn(tokens, h, d, generator=g, dtype=torch.float64) for h in (4, 2, 2))
    x = torch.randn(tokens, hidden, generator=g, dtype=torch.float64) * 3
    cos, sin = torch.randn(6, d, generator=g), torch.randn(6, d, generator=g)
    positions, slot_ids = torch.tensor([1, 4, 2], dtype=torch.int32), torch.tensor([0, 1, 2], dtype=torch.int32)
    caches = [torch.zeros(3, 2, 6, d, dtype=torch.float64) for _ in range(4)]
    scaled = ops.rope_kv_write(q, k, v, caches[0], caches[1], positions, slot_ids, cos, sin, norm_input=x, norm_eps=1e-5)
    scale = (x.pow(2).mean(-1) + 1e-5).rsqrt()[:, None, None]
    plain = ops.rope_kv_write(q * scale, k * scale, v * scale, caches[2], caches[3], positions, slot_ids, cos, sin)
    # The op's statistic is float32 (row_scale's), the expectation's float64.
    torch.testing.assert_close(scaled, plain, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(caches[0], caches[2], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(caches[1], caches[3], rtol=1e-6, atol=1e-6)


def test_rope_kv_write_rejects_a_bad_norm_input():
    q, k, v = (torch.randn(2, h, 8) for h in (2, 1, 1))
    caches = torch.zeros(2, 1, 4, 8), torch.zeros(2, 1, 4, 8)
    index = torch.tensor([1, 0], dtype=torch.int32)
    for bad in (torch.randn(3, 16), torch.randn(2, 16, dtype=torch.float64), torch.randn(16, 2).t()):
        with pytest.raises(ValueError, match="norm_input must be contiguous"):
            ops.rope_kv_write(q, k, v, *caches, index, index, norm_input=bad)


def test_decode_attention_matches_naive_softmax_with_gqa_and_ragged_lengths():
    g = gen(4)
    batch, q_heads, kv_heads, d, slots, max_len = 3, 8, 2, 16, 4, 12
    q = torch.randn(batch, q_heads, d, generator=g)
    k_cache = torch.randn(slots, kv_heads, max_len, d, generator=g)
    v_cache = torch.randn(slots, kv_heads, max_len, d, generator=g)
    slot_ids = torch.tensor([3, 0, -1], dtype=torch.int32)
    lengths = torch.tensor([5, 12, 4], dtype=torch.int32)
    out = ops.decode_attention(q, k_cache, v_cache, slot_ids, lengths)
    expected = torch.zeros(batch, q_heads, d, dtype=torch.float64)
    for b in range(2):
        for h in range(q_heads):
            kv = h // (q_heads // kv_heads)
            n = int(lengths[b])
            keys = k_cache[slot_ids[b], kv, :n].double()
            scores = [float(q[b, h].double() @ keys[t]) / math.sqrt(d) for t in range(n)]
            top = max(scores)
            weights = torch.tensor([math.exp(s - top) for s in scores], dtype=torch.float64)
            expected[b, h] = (weights[:, None] * v_cache[slot_ids[b], kv, :n].double()).sum(0) / weights.sum()
    torch.testing.assert_close(out.double(), expected, rtol=1e-5, atol=1e-5)


def test_swiglu_matches_formula():
    gate_up = torch.randn(3, 2 * 24, generator=gen(5))
    gate, up = gate_up.double()[:, :24], gate_up.double()[:, 24:]
    torch.testing.assert_close(ops.swiglu(gate_up).double(), gate / (1 + torch.exp(-gate)) * up, rtol=1e-6, atol=1e-6)


def test_swiglu_with_a_norm_input_scales_gate_and_up_by_its_row_statistic():
    g = gen(22)
    gate_up = torch.randn(2, 3, 2 * 24, generator=g, dtype=torch.float64)
    x = torch.randn(2, 3, 40, generator=g, dtype=torch.float64) * 2
    scale = (x.pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt()
    torch.testing.assert_close(ops.swiglu(gate_up, norm_input=x), ops.swiglu(gate_up * scale), rtol=1e-6, atol=1e-6)
    for bad in (torch.randn(2, 40), torch.randn(2, 3, 40, dtype=torch.float32), torch.randn(2, 40, 3).transpose(1, 2)):
        with pytest.raises(ValueError, match="norm_input must be contiguous"):
            ops.swiglu(gate_up, norm_input=bad)


def test_cfg_euler_step_matches_cfg_zero_star_formula_per_stream():
    g = gen(6)
    x = torch.randn(3, 64, 4, generator=g)
    v_cond = torch.randn(3, 64, 4, generator=g)
    v_uncond = torch.randn(3, 64, 4, generator=g)
    cfg = torch.tensor([2.0, 1.0, 3.5])
    dt = torch.tensor([0.1, 0.25, 0.05])
    expected = x.double().clone()
    for b in range(3):
        c, u = v_cond[b].double().flatten(), v_uncond[b].double().flatten()
        st = float(c @ u) / (float(u @ u) + 1e-8)
        v = u * st + float(cfg[b]) * (c - u * st)
        expected[b] -= float(dt[b]) * v.view(64, 4)
    ops.cfg_euler_step(x, v_cond, v_uncond, cfg, dt)
    torch.testing.assert_close(x.double(), expected, rtol=1e-5, atol=1e-5)


def test_fsq_matches_formula_with_half_to_even_rounding():
    h = torch.randn(4, 512, generator=gen(7)) * 2
    scaled = torch.tanh(h.double()) * 9
    expected = torch.round(scaled) / 9
    near_half_step = (scaled - scaled.floor() - 0.5).abs() < 1e-5
    out = ops.fsq(h, 9)
    assert (out.double() - expected).abs()[~near_half_step].max() < 1e-6
    assert set(torch.unique(torch.round(out.double() * 9)).tolist()) <= set(range(-9, 10))
    assert torch.equal(ops.fsq(torch.tensor([0.0]), 9), torch.tensor([0.0]))


@pytest.mark.parametrize(
    "name",
    ["rmsnorm", "add_rmsnorm", "rope_kv_write", "decode_attention", "swiglu", "cfg_euler_step", "fsq"],
)
def test_custom_op_schema_and_fake_implementation(name):
    g = gen(8)
    i32 = torch.int32
    cases = {
        "rmsnorm": (torch.randn(2, 32, generator=g), torch.randn(32, generator=g), 1e-5),
        "add_rmsnorm": (torch.randn(2, 32, generator=g), torch.randn(2, 32, generator=g), torch.randn(32), 1e-5, 1.0),
        "rope_kv_write": (torch.randn(2, 4, 8), torch.randn(2, 2, 8), torch.randn(2, 2, 8), torch.zeros(3, 2, 5, 8),
                          torch.zeros(3, 2, 5, 8), torch.tensor([1, 2], dtype=i32), torch.tensor([0, 2], dtype=i32),
                          torch.randn(6, 8), torch.randn(6, 8), torch.randn(2, 12), 1e-6),
        "decode_attention": (torch.randn(2, 4, 8), torch.randn(3, 2, 5, 8), torch.randn(3, 2, 5, 8),
                             torch.tensor([2, 0], dtype=i32), torch.tensor([3, 5], dtype=i32), 0.35, 1),
        "swiglu": (torch.randn(3, 16), torch.randn(3, 12), 1e-6),
        "cfg_euler_step": (torch.randn(2, 8, 4), torch.randn(2, 8, 4), torch.randn(2, 8, 4), torch.tensor([2.0, 1.5]),
                           torch.tensor([0.1, 0.2])),
        "fsq": (torch.randn(2, 16), 9.0),
    }
    torch.library.opcheck(getattr(torch.ops.voxcpm, name), cases[name],
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


def test_validation_names_the_bad_argument():
    with pytest.raises(ValueError, match="weight must be"):
        ops.rmsnorm(torch.randn(2, 8), torch.randn(7), 1e-5)
    with pytest.raises(ValueError, match="gate_up's last dimension"):
        ops.swiglu(torch.randn(2, 7))
    with pytest.raises(ValueError, match="cfg must be float32"):
        ops.cfg_euler_step(torch.randn(2, 4, 1), torch.randn(2, 4, 1), torch.randn(2, 4, 1), torch.ones(3), torch.ones(2))
    with pytest.raises(ValueError, match="slot_ids must be int32"):
        ops.decode_attention(torch.randn(1, 2, 8), torch.randn(1, 1, 4, 8), torch.randn(1, 1, 4, 8),
                             torch.zeros(1, dtype=torch.float32), torch.ones(1, dtype=torch.int32))


def test_arguments_a_kernel_would_read_past_are_refused():
    g = gen(7)
    q, k, v = (torch.randn(2, h, 8, generator=g) for h in (2, 1, 1))
    caches = torch.zeros(2, 1, 4, 8), torch.zeros(2, 1, 4, 8)
    index = torch.zeros(2, dtype=torch.int32)
    with pytest.raises(ValueError, match="cos and sin must have one shape"):
        ops.rope_kv_write(q, k, v, *caches, index, index, torch.randn(4, 8), torch.randn(1, 8))
    with pytest.raises(ValueError, match="k_cache must be"):  # no KV heads: nothing to divide by
        ops.decode_attention(torch.randn(1, 2, 8), torch.randn(1, 0, 4, 8), torch.randn(1, 0, 4, 8), index[:1],
                             index[:1])
    x, weight = torch.randn(3, 32, generator=g), torch.randn(64, 32, generator=g)
    with pytest.raises(ValueError, match="residual must be"):
        ops.linear_residual_(x, weight, torch.zeros(3, 64, device="meta"), 1.0)
    with pytest.raises(ValueError, match="interleaved must be"):  # e.g. the weight of another layer size
        ops.gate_up_swiglu(x, weight, torch.randn(32, 32, generator=g))


def test_an_int64_index_past_int32_does_not_wrap_into_the_cache():
    g = gen(8)
    q, k, v = (torch.randn(1, h, 8, generator=g) for h in (2, 1, 1))
    k_cache, v_cache = torch.zeros(2, 1, 4, 8), torch.zeros(2, 1, 4, 8)
    for slot, position in ((2**32, 1), (1, 2**32 + 1)):  # int32 wrapping would give slot 0 / position 1
        ops.rope_kv_write(q, k, v, k_cache, v_cache, torch.tensor([position]), torch.tensor([slot]))
        assert not k_cache.any() and not v_cache.any()
