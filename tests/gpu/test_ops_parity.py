"""Every CUDA op of libvoxcpm_kernels against its PyTorch reference on VoxCPM2 shapes (hidden 2048 /
1024, 16 q / 2 kv heads, head 128, 1..256 streams x 9 LocDiT tokens) in bf16, fp16 and fp32.

Tolerances (absolute and relative, per dtype): bf16 1.6e-2 (two bf16 ulps near 1), fp16 2e-3, fp32
2e-5. Ops that reproduce the reference's roundings (RMSNorm, RoPE, SwiGLU, FSQ) sit well inside them.
Build the library first: build/build_kernels.sh (perf/run_kernel_checks.sh does both).
"""

from __future__ import annotations

import math

import pytest
import torch

from tests.gpu.op_checks import DEVICE, close, randn
from voxcpm_triton import ops
from voxcpm_triton.ops import library

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

DTYPES = (torch.bfloat16, torch.float16, torch.float32)
ROWS = (1, 9, 7 * 9, 256 * 9)  # LocDiT tokens of 1, 1, 7 and 256 streams


@pytest.fixture(scope="module", autouse=True)
def kernels_loaded():
    if torch.cuda.is_available():
        assert library.library() is not None, f"kernels library not loaded ({library.library_status()}); " \
                                              "build it with build/build_kernels.sh"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hidden", (2048, 1024))
@pytest.mark.parametrize("rows", ROWS)
def test_add_rmsnorm(dtype, hidden, rows):
    x = randn(rows, hidden, dtype=dtype, seed=1)
    residual = randn(rows, hidden, dtype=dtype, seed=2)
    weight = randn(hidden, dtype=dtype, seed=3, scale=0.5)
    x_ref = x.clone()
    expected = ops.add_rmsnorm_ref(x_ref, residual, weight, 1e-5)
    out = torch.ops.voxcpm.add_rmsnorm(x, residual, weight, 1e-5, 1.0)
    close(x, x_ref, dtype)
    close(out, expected, dtype)
    close(ops.rmsnorm(x, weight, 1e-6), ops.rmsnorm_ref(x, weight, 1e-6), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_rmsnorm_scaled_residual_and_unaligned_hidden(dtype):
    # hidden 1000 is not a multiple of the vector width: exercises the scalar path.
    x = randn(5, 1000, dtype=dtype, seed=4)
    residual = randn(5, 1000, dtype=dtype, seed=5)
    weight = randn(1000, dtype=dtype, seed=6)
    x_ref = x.clone()
    expected = ops.add_rmsnorm_ref(x_ref, residual, weight, 1e-5, 0.3)
    close(ops.add_rmsnorm(x, residual, weight, 1e-5, residual_scale=0.3), expected, dtype)
    close(x, x_ref, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("inter", (6144, 4096))
@pytest.mark.parametrize("rows", ROWS)
def test_swiglu(dtype, inter, rows):
    gate_up = randn(rows, 2 * inter, dtype=dtype, seed=7, scale=2.0)
    close(ops.swiglu(gate_up), ops.swiglu_ref(gate_up), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", (1, 9, 256))
def test_fsq(dtype, rows):
    h = randn(rows, 512, dtype=dtype, seed=8, scale=1.5)
    out = ops.fsq(h, 9)
    expected = ops.fsq_ref(h, 9)
    # A level may differ only where tanh(h) * 9 sits within rounding of a half step.
    differs = out.float() != expected.float()
    assert differs.sum() <= max(1, differs.numel() // 1000)
    assert ((out.float() - expected.float()).abs()[differs] <= 1 / 9 + 1e-2).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", (1, 9, 256))
@pytest.mark.parametrize("patch", (4, 2))
def test_cfg_euler_step(dtype, batch, patch):
    x = randn(batch, 64, patch, dtype=dtype, seed=9)
    v_cond = randn(batch, 64, patch, dtype=dtype, seed=10)
    v_uncond = randn(batch, 64, patch, dtype=dtype, seed=11)
    cfg = torch.linspace(1.0, 3.0, batch, device=DEVICE)
    dt = torch.linspace(0.05, 0.3, batch, device=DEVICE)
    x_ref = x.clone()
    ops.cfg_euler_step_ref(x_ref, v_cond, v_uncond, cfg, dt)
    ops.cfg_euler_step(x, v_cond, v_uncond, cfg, dt)
    close(x, x_ref, dtype)


def rope_tables(max_len: int, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=DEVICE).float() / head_dim))
    divisors = torch.linspace(1.0, 40.0, head_dim // 2, device=DEVICE)  # LongRoPE-like per-frequency factors
    angles = torch.outer(torch.arange(max_len, device=DEVICE).float(), 1.0 / divisors) * inv_freq
    angles = torch.cat((angles, angles), dim=-1)
    factor = math.sqrt(1 + math.log(4) / math.log(8192))
    return angles.cos() * factor, angles.sin() * factor


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ("decode", "prefill_chunk", "no_rope"))
@pytest.mark.parametrize("tokens", (1, 9, 256))
def test_rope_kv_write(dtype, mode, tokens):
    q_heads, kv_heads, head_dim, max_len = 16, 2, 128, 512
    slots = tokens + 3
    # Views into one fused qkv projection output, as the model produces them.
    qkv = randn(tokens, (q_heads + 2 * kv_heads) * head_dim, dtype=dtype, seed=12, scale=2.0)
    q, k, v = qkv.split([q_heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], dim=-1)
    q, k, v = (t.view(tokens, -1, head_dim) for t in (q, k, v))
    g = torch.Generator(device=DEVICE).manual_seed(13)
    if mode == "prefill_chunk":
        slot_ids = torch.full((tokens,), 2, dtype=torch.int32, device=DEVICE)
        positions = torch.arange(40, 40 + tokens, dtype=torch.int32, device=DEVICE)
    else:
        slot_ids = torch.randperm(slots, generator=g, device=DEVICE)[:tokens].int()
        positions = torch.randint(0, max_len, (tokens,), generator=g, device=DEVICE).int()
        if tokens > 1:
            slot_ids[-1] = -1  # a padding row writes nothing
    cos, sin = rope_tables(1024, head_dim) if mode != "no_rope" else (None, None)
    k_cache = torch.full((slots, kv_heads, max_len, head_dim), float("nan"), device=DEVICE, dtype=dtype)
    v_cache = torch.full_like(k_cache, float("nan"))
    k_ref, v_ref = k_cache.clone(), v_cache.clone()
    expected = ops.rope_kv_write_ref(q, k, v, k_ref, v_ref, positions, slot_ids, cos, sin)
    out = ops.rope_kv_write(q, k, v, k_cache, v_cache, positions, slot_ids, cos, sin)
    close(out, expected, dtype)
    written = ~torch.isnan(k_ref)
    assert torch.equal(written, ~torch.isnan(k_cache)), "cache rows written differ from the reference"
    assert torch.equal(~torch.isnan(v_ref), ~torch.isnan(v_cache))
    close(k_cache[written], k_ref[written], dtype)
    assert torch.equal(v_cache[written], v_ref[written])


def attention_case(dtype, batch, q_heads, kv_heads, head_dim, max_len, seed):
    slots = batch + 3
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    q = randn(batch, q_heads, head_dim, dtype=dtype, seed=seed + 1)
    k_cache = randn(slots, kv_heads, max_len, head_dim, dtype=dtype, seed=seed + 2)
    v_cache = randn(slots, kv_heads, max_len, head_dim, dtype=dtype, seed=seed + 3)
    slot_ids = torch.randperm(slots, generator=g, device=DEVICE)[:batch].int()
    lengths = torch.randint(1, max_len + 1, (batch,), generator=g, device=DEVICE).int()
    if batch > 2:
        slot_ids[1] = -1  # padding row: zeros out
        lengths[2] = max_len  # one stream with a full cache
    # Stale rows past each live length are NaN: reading any of them would poison the output.
    stale = torch.arange(max_len, device=DEVICE)[None, :] >= lengths[:, None]
    for b in range(batch):
        if slot_ids[b] >= 0:
            k_cache[slot_ids[b], :, stale[b]] = float("nan")
            v_cache[slot_ids[b], :, stale[b]] = float("nan")
    return q, k_cache, v_cache, slot_ids, lengths


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", (1, 9, 64, 256))
@pytest.mark.parametrize("num_splits", (None, 1, 7))
def test_decode_attention_voxcpm2_heads(dtype, batch, num_splits):
    q, k_cache, v_cache, slot_ids, lengths = attention_case(dtype, batch, 16, 2, 128, 700, seed=20)
    expected = ops.decode_attention_ref(q.float(), k_cache.float(), v_cache.float(), slot_ids, lengths)
    out = ops.decode_attention(q, k_cache, v_cache, slot_ids, lengths, num_splits=num_splits)
    close(out, expected, dtype)
    if batch > 2:
        assert torch.equal(out[1], torch.zeros_like(out[1]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads", ((16, 16, 64), (12, 4, 128), (32, 2, 64), (8, 1, 128)))
def test_decode_attention_other_head_layouts(dtype, heads):
    q_heads, kv_heads, head_dim = heads
    q, k_cache, v_cache, slot_ids, lengths = attention_case(dtype, 5, q_heads, kv_heads, head_dim, 300, seed=30)
    expected = ops.decode_attention_ref(q.float(), k_cache.float(), v_cache.float(), slot_ids, lengths)
    close(ops.decode_attention(q, k_cache, v_cache, slot_ids, lengths), expected, dtype)


def test_decode_attention_reads_a_layer_view_of_the_engine_cache():
    # KVCache stores [layers, slots, kv_heads, max_context, head_dim]; ops get cache[layer].
    dtype = torch.bfloat16
    full_k = randn(3, 6, 2, 256, 128, dtype=dtype, seed=40)
    full_v = randn(3, 6, 2, 256, 128, dtype=dtype, seed=41)
    q = randn(4, 16, 128, dtype=dtype, seed=42)
    slot_ids = torch.tensor([5, 0, 3, 1], dtype=torch.int32, device=DEVICE)
    lengths = torch.tensor([256, 1, 77, 130], dtype=torch.int32, device=DEVICE)
    expected = ops.decode_attention_ref(q.float(), full_k[1].float(), full_v[1].float(), slot_ids, lengths)
    close(ops.decode_attention(q, full_k[1], full_v[1], slot_ids, lengths), expected, dtype)


@pytest.mark.parametrize("name", ["rmsnorm", "swiglu", "fsq", "decode_attention", "rope_kv_write", "cfg_euler_step"])
def test_opcheck_on_cuda(name):
    dtype = torch.bfloat16
    i32 = dict(dtype=torch.int32, device=DEVICE)
    cases = {
        "rmsnorm": (randn(4, 2048, dtype=dtype, seed=50), randn(2048, dtype=dtype, seed=51), 1e-5),
        "swiglu": (randn(4, 2 * 6144, dtype=dtype, seed=52), randn(4, 2048, dtype=dtype, seed=65), 1e-6),
        "fsq": (randn(4, 512, dtype=dtype, seed=53), 9.0),
        "decode_attention": (randn(2, 16, 128, dtype=dtype, seed=54), randn(3, 2, 64, 128, dtype=dtype, seed=55),
                             randn(3, 2, 64, 128, dtype=dtype, seed=56), torch.tensor([2, 0], **i32),
                             torch.tensor([30, 64], **i32), 1 / math.sqrt(128), 4),
        "rope_kv_write": (randn(2, 16, 128, dtype=dtype, seed=57), randn(2, 2, 128, dtype=dtype, seed=58),
                          randn(2, 2, 128, dtype=dtype, seed=59), randn(3, 2, 64, 128, dtype=dtype, seed=60),
                          randn(3, 2, 64, 128, dtype=dtype, seed=61), torch.tensor([3, 9], **i32),
                          torch.tensor([1, 2], **i32), *rope_tables(64, 128), randn(2, 2048, dtype=dtype, seed=66),
                          1e-6),
        "cfg_euler_step": (randn(3, 64, 4, dtype=dtype, seed=62), randn(3, 64, 4, dtype=dtype, seed=63),
                           randn(3, 64, 4, dtype=dtype, seed=64), torch.full((3,), 2.0, device=DEVICE),
                           torch.full((3,), 0.1, device=DEVICE)),
    }
    torch.library.opcheck(getattr(torch.ops.voxcpm, name), cases[name],
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("batch", "hidden"), ((1, 1024), (64, 1024), (5, 1001)))
def test_locdit_sequence_is_the_concatenation(dtype, batch, hidden):
    # hidden 1001: rows that are not whole 16-byte vectors take the element-wise path.
    mu_pair = randn(2, batch, 2 * hidden, dtype=dtype, seed=70)
    time, cond, x = randn(hidden, dtype=dtype, seed=71), randn(batch, 4, hidden, dtype=dtype, seed=72), \
        randn(batch, 4, hidden, dtype=dtype, seed=73)
    assert torch.equal(ops.locdit_sequence(mu_pair, time, cond, x), ops.locdit_sequence_ref(mu_pair, time, cond, x))


def test_locdit_sequence_replays_in_a_cuda_graph():
    dtype = torch.bfloat16
    parts = [randn(2, 8, 2048, dtype=dtype, seed=74), randn(1024, dtype=dtype, seed=75),
             randn(8, 4, 1024, dtype=dtype, seed=76), randn(8, 4, 1024, dtype=dtype, seed=77)]
    ops.locdit_sequence(*parts)  # loads the library outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.locdit_sequence(*parts)
    for seed, part in enumerate(parts):
        part.copy_(randn(*part.shape, dtype=dtype, seed=80 + seed))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, ops.locdit_sequence_ref(*parts))
