"""gate_up_sm90's CPU side: the interleaved weight layout the CUDA kernel reads (mirroring the
header's constants), its reference, argument checks, and the fallbacks that keep every CPU and
non-Hopper call on swiglu(F.linear)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from tests.cpu.tiny_reference import tiny_config_dict
from voxcpm_triton.config import parse_config
from voxcpm_triton.model.fast_path import enable_custom_ops, enable_sm90_gate_up
from voxcpm_triton.model.mlp import MLP
from voxcpm_triton.model.voxcpm import build_model
from voxcpm_triton.ops import gate_up_sm90
from voxcpm_triton.ops.skinny_linear import gate_up_swiglu
from voxcpm_triton.ops.swiglu import swiglu_ref

HEADER = Path(__file__).resolve().parents[2] / "kernels" / "voxcpm_kernels.h"


def _define(name: str) -> int:
    found = re.search(rf"#define {name} (\d+)", HEADER.read_text())
    assert found is not None, name
    return int(found.group(1))


def test_constants_match_the_header():
    assert gate_up_sm90.INTERLEAVE == _define("VOXCPM_GATE_UP_INTERLEAVE")
    in_header = {name: _define(f"VOXCPM_GATE_UP_{name.upper()}") for name in gate_up_sm90.SCHEDULES}
    assert in_header == gate_up_sm90.SCHEDULES
    assert sorted(gate_up_sm90.SCHEDULES.values()) == list(range(_define("VOXCPM_GATE_UP_SCHEDULES")))


def test_interleave_alternates_gate_and_up_blocks_and_inverts():
    block, inter, k = gate_up_sm90.INTERLEAVE, 3 * gate_up_sm90.INTERLEAVE, 4
    weight = torch.arange(2 * inter, dtype=torch.float32).unsqueeze(1).expand(2 * inter, k).contiguous()
    interleaved = gate_up_sm90.interleave(weight)
    rows = interleaved[:, 0].long().tolist()
    expected = []
    for j in range(inter // block):
        expected += list(range(j * block, (j + 1) * block))  # gate block j
        expected += list(range(inter + j * block, inter + (j + 1) * block))  # up block j
    assert rows == expected
    assert torch.equal(gate_up_sm90.deinterleave(interleaved), weight)


def test_interleave_refuses_widths_the_kernel_cannot_tile():
    with pytest.raises(ValueError, match="multiple of"):
        gate_up_sm90.interleave(torch.zeros(2 * 100, 8))


def test_reference_is_swiglu_of_the_gemm_on_the_fused_weight():
    torch.manual_seed(0)
    x = torch.randn(5, 16, dtype=torch.bfloat16)
    weight = torch.randn(2 * 256, 16, dtype=torch.bfloat16)
    out = gate_up_sm90.fused(x, gate_up_sm90.interleave(weight))
    assert torch.equal(out, swiglu_ref(F.linear(x, weight)))


def test_bad_arguments_are_refused():
    x = torch.zeros(4, 16, dtype=torch.bfloat16)
    weight = gate_up_sm90.interleave(torch.zeros(512, 16, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="bf16"):
        gate_up_sm90.fused(x.float(), weight.float())
    with pytest.raises(ValueError, match="rows, k"):
        gate_up_sm90.fused(x[:, :8], weight)
    with pytest.raises(ValueError, match="schedule"):
        gate_up_sm90.fused(x, weight, 5)


def test_cpu_tensors_never_take_the_kernel_path():
    x = torch.randn(1024, 16, dtype=torch.bfloat16)
    weight = torch.randn(512, 16, dtype=torch.bfloat16)
    interleaved = gate_up_sm90.interleave(weight)
    assert not gate_up_sm90.available(weight)
    assert gate_up_sm90.choice(x, weight, interleaved) == "unfused"
    assert torch.equal(gate_up_swiglu(x, weight, interleaved), swiglu_ref(F.linear(x, weight)))


def test_enable_gives_no_copies_where_the_kernel_cannot_run():
    model = build_model(parse_config(tiny_config_dict("voxcpm2"))).eval()
    enable_custom_ops(model, True)
    assert enable_sm90_gate_up(model, True) == 0
    mlps = [module for module in model.modules() if isinstance(module, MLP)]
    assert mlps and all(mlp.gate_up_interleaved is None for mlp in mlps)
