"""The CUDA ops inside a captured CUDA graph and under torch.compile: a decoder-step-like sequence
(add+RMSNorm, RoPE+KV write, decode attention, SwiGLU, FSQ, CFG-Euler) captured once, replayed on
new inputs, equals the same sequence run eagerly."""

from __future__ import annotations

import pytest
import torch

from voxcpm_triton import ops
from voxcpm_triton.ops import library

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

DEVICE = "cuda"
DTYPE = torch.bfloat16
BATCH, HIDDEN, Q_HEADS, KV_HEADS, HEAD_DIM, INTER, SLOTS, MAX_LEN = 4, 2048, 16, 2, 128, 6144, 6, 64


def make_state(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator(device=DEVICE).manual_seed(seed)

    def rand(*shape, dtype=DTYPE):
        return torch.randn(*shape, generator=g, device=DEVICE).to(dtype)

    return {
        "x": rand(BATCH, HIDDEN),
        "attn_out": rand(BATCH, HIDDEN),
        "norm_w": rand(HIDDEN),
        "qkv": rand(BATCH, (Q_HEADS + 2 * KV_HEADS) * HEAD_DIM),
        "k_cache": rand(SLOTS, KV_HEADS, MAX_LEN, HEAD_DIM),
        "v_cache": rand(SLOTS, KV_HEADS, MAX_LEN, HEAD_DIM),
        "cos": rand(MAX_LEN, HEAD_DIM, dtype=torch.float32),
        "sin": rand(MAX_LEN, HEAD_DIM, dtype=torch.float32),
        "positions": torch.randint(0, MAX_LEN, (BATCH,), generator=g, device=DEVICE).int(),
        "slot_ids": torch.randperm(SLOTS, generator=g, device=DEVICE)[:BATCH].int(),
        "gate_up": rand(BATCH, 2 * INTER),
        "fsq_in": rand(BATCH, 512),
        "latent": rand(BATCH, 64, 4),
        "v_cond": rand(BATCH, 64, 4),
        "v_uncond": rand(BATCH, 64, 4),
        "cfg": torch.rand(BATCH, generator=g, device=DEVICE) + 1.5,
        "dt": torch.rand(BATCH, generator=g, device=DEVICE) * 0.2,
    }


def step(s: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    normed = ops.add_rmsnorm(s["x"], s["attn_out"], s["norm_w"], 1e-5)
    q, k, v = s["qkv"].split([Q_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], dim=-1)
    q_rot = ops.rope_kv_write(q.view(BATCH, Q_HEADS, HEAD_DIM), k.view(BATCH, KV_HEADS, HEAD_DIM),
                              v.view(BATCH, KV_HEADS, HEAD_DIM), s["k_cache"], s["v_cache"], s["positions"],
                              s["slot_ids"], s["cos"], s["sin"])
    attn = ops.decode_attention(q_rot, s["k_cache"], s["v_cache"], s["slot_ids"], s["positions"] + 1)
    mlp = ops.swiglu(s["gate_up"])
    quantised = ops.fsq(s["fsq_in"], 9.0)
    ops.cfg_euler_step(s["latent"], s["v_cond"], s["v_uncond"], s["cfg"], s["dt"])
    return {"normed": normed, "attn": attn, "mlp": mlp, "fsq": quantised}


def assert_same(graphed: dict[str, torch.Tensor], eager: dict[str, torch.Tensor]) -> None:
    for name in eager:
        torch.testing.assert_close(graphed[name], eager[name], atol=0, rtol=0, msg=f"{name} differs")


def test_ops_replay_in_a_cuda_graph_equals_eager():
    assert library.library() is not None, library.library_status()
    static = make_state(0)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside capture, as CUDA-graph capture requires
        step({k: v.clone() for k, v in static.items()})
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = step(static)

    for seed in (1, 2):
        fresh = make_state(seed)
        for name, tensor in fresh.items():
            static[name].copy_(tensor)
        graph.replay()
        torch.cuda.synchronize()
        expected_state = make_state(seed)
        expected = step(expected_state)
        assert_same(outputs, expected)
        for name in ("x", "k_cache", "v_cache", "latent"):  # in-place updates happened in the graph too
            torch.testing.assert_close(static[name], expected_state[name], atol=0, rtol=0, msg=name)


def test_ops_compile_with_fullgraph():
    assert library.library() is not None, library.library_status()
    compiled = torch.compile(step, fullgraph=True)
    eager_state, compiled_state = make_state(3), make_state(3)
    assert_same(compiled(compiled_state), step(eager_state))
    for name in ("x", "k_cache", "v_cache", "latent"):
        torch.testing.assert_close(compiled_state[name], eager_state[name], atol=0, rtol=0, msg=name)
