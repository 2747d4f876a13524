"""The L2 weight prefetch's wiring: which weights each decoder stack asks for, in which order, and
at which row counts (the op itself is a hint; its kernel is tested on the GPU)."""

from __future__ import annotations

import pytest
import torch

from voxcpm_triton import ops
from voxcpm_triton.checkpoint.make import config_dict
from voxcpm_triton.config import parse_config
from voxcpm_triton.model import fast_path
from voxcpm_triton.model.minicpm import DecodeSlots, MiniCPMModel
from voxcpm_triton.model.voxcpm import build_model
from voxcpm_triton.ops.prefetch_l2 import byte_ranges


@pytest.fixture
def model():
    torch.manual_seed(0)
    model = build_model(parse_config(config_dict("voxcpm2", "tiny"))).eval()
    fast_path.enable_custom_ops(model, True)
    return model


@pytest.fixture
def requests(monkeypatch):
    """Every prefetch_l2 call as (data pointers of its tensors, max_bytes)."""
    calls = []
    monkeypatch.setattr(ops, "prefetch_l2", lambda tensors, max_bytes: calls.append(
        ([t.data_ptr() for t in tensors], max_bytes)))
    return calls


def layer_weights(stack: MiniCPMModel) -> list[list[int]]:
    return [[layer.self_attn.qkv_weight.data_ptr(), layer.self_attn.o_proj.weight.data_ptr(),
             layer.mlp.gate_up_weight.data_ptr(), layer.mlp.down_proj.weight.data_ptr()] for layer in stack.layers]


def set_prefetch(stack: MiniCPMModel, rows: int, max_bytes: int = 1 << 20) -> None:
    stack.prefetch_rows, stack.prefetch_bytes = rows, max_bytes


def test_whole_sequence_forward_prefetches_every_layer_in_order(model, requests):
    dit = model.feat_decoder.estimator.decoder
    set_prefetch(dit, rows=22, max_bytes=12345)
    dit(torch.randn(2, 11, dit.config.hidden_size), causal=False)
    assert requests == [(weights, 12345) for weights in layer_weights(dit)]


def test_no_prefetch_above_the_row_limit_or_when_off(model, requests):
    dit = model.feat_decoder.estimator.decoder
    set_prefetch(dit, rows=21)
    dit(torch.randn(2, 11, dit.config.hidden_size), causal=False)
    set_prefetch(dit, rows=0)
    dit(torch.randn(1, 3, dit.config.hidden_size), causal=False)
    assert requests == []


def test_decode_prefetches_every_layer_in_order(model, requests):
    lm = model.base_lm
    set_prefetch(lm, rows=2)
    layers, heads, head_dim = len(lm.layers), lm.config.num_key_value_heads, lm.config.head_dim
    caches = [torch.zeros(layers, 3, heads, 8, head_dim) for _ in range(2)]
    where = DecodeSlots(slots=torch.tensor([0, 2]), positions=torch.tensor([0, 3]), span=4)
    out = lm.decode(torch.randn(2, lm.config.hidden_size), *caches, where)
    assert out.shape == (2, lm.config.hidden_size)
    assert requests == [(weights, 1 << 20) for weights in layer_weights(lm)]


def test_enable_custom_ops_reads_the_environment(monkeypatch):
    monkeypatch.setenv("VOXCPM_PREFETCH_ROWS", "7")
    monkeypatch.setenv("VOXCPM_PREFETCH_MB", "3")
    model = build_model(parse_config(config_dict("voxcpm2", "tiny")))
    fast_path.enable_custom_ops(model, True)
    assert {(m.prefetch_rows, m.prefetch_bytes) for m in model.modules() if isinstance(m, MiniCPMModel)} == {(7, 3 << 20)}
    fast_path.enable_custom_ops(model, False)
    assert {m.prefetch_rows for m in model.modules() if isinstance(m, MiniCPMModel)} == {0}
    monkeypatch.setenv("VOXCPM_PREFETCH_ROWS", "-1")
    with pytest.raises(ValueError, match="VOXCPM_PREFETCH_ROWS"):
        fast_path.enable_custom_ops(model, True)


def test_byte_ranges_stop_at_the_cap():
    a, b, c = torch.zeros(100, dtype=torch.bfloat16), torch.zeros(10), torch.zeros(4)
    assert byte_ranges([a, b, c], 230) == [(a.data_ptr(), 200), (b.data_ptr(), 30)]
    assert byte_ranges([a, b], 10_000) == [(a.data_ptr(), 200), (b.data_ptr(), 40)]
    assert byte_ranges([a], 0) == []


def test_prefetch_validates_its_arguments():
    weight = torch.zeros(8, 8)
    ops.prefetch_l2([weight], 64)  # CPU tensors: the reference, which does nothing
    with pytest.raises(ValueError, match="1..4 tensors"):
        ops.prefetch_l2([weight] * 5, 64)
    with pytest.raises(ValueError, match="max_bytes"):
        ops.prefetch_l2([weight], -1)
    with pytest.raises(ValueError, match="contiguous"):
        ops.prefetch_l2([weight.t()], 64)
    with pytest.raises(ValueError, match="16-byte aligned"):
        ops.prefetch_l2([weight.view(-1)[1:]], 64)
