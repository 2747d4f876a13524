"""The step-state ops' references (ops/step_state.py), which are also the CPU path of the
fixed-shape step, and the wrappers' argument checks."""

from __future__ import annotations

import pytest
import torch

from voxcpm_triton import ops


def state(slots: int = 3, hidden: int = 4, patch: int = 2, feat: int = 3, block: int = 2) -> dict[str, torch.Tensor]:
    rows = slots + 1
    return {
        "ring": torch.arange(rows * block * feat * patch, dtype=torch.float32).view(rows, block, feat, patch),
        "lm_hidden": torch.randn(rows, hidden),
        "residual_hidden": torch.randn(rows, hidden),
        "prev_patch": torch.randn(rows, patch, feat),
        "cfg_value": torch.tensor([1.0, 2.0, 3.0, 0.0]),
        "positions": torch.tensor([5, 0, 9, 0]),
    }


def test_gather_reads_each_rows_slot_and_its_ring_draw_transposed():
    s = state()
    index = torch.tensor([[2, 0, 3], [1, 0, 0]])  # the last row is padding (the scratch slot)
    noise, lm, residual, prev, cfg, kernel_index = ops.step_gather(index, *s.values())
    assert torch.equal(noise[0], s["ring"][2, 1].T) and noise.is_contiguous()
    assert torch.equal(lm, s["lm_hidden"][[2, 0, 3]]) and torch.equal(prev, s["prev_patch"][[2, 0, 3]])
    assert torch.equal(residual, s["residual_hidden"][[2, 0, 3]])
    assert cfg.tolist() == [3.0, 1.0, 0.0]
    assert kernel_index.dtype == torch.int32 and kernel_index.tolist() == [[2, 0, 3], [9, 5, 0], [10, 6, 1]]


def test_scatter_writes_the_slots_and_keeps_the_scratch_position_at_zero():
    s = state()
    index = torch.tensor([[2, 3], [0, 0]])
    next_lm, next_residual, patch = torch.randn(2, 4), torch.randn(2, 4), torch.randn(2, 2, 3)
    stop_logits = torch.tensor([[0.0, 1.0], [2.0, 2.0]])  # stop, then a tie (argmax: the first)
    out = ops.step_scatter(index, torch.tensor([10, 1], dtype=torch.int32), next_lm, next_residual, patch,
                           stop_logits, s["lm_hidden"], s["residual_hidden"], s["prev_patch"], s["positions"])
    assert torch.equal(s["lm_hidden"][2], next_lm[0]) and torch.equal(s["prev_patch"][2], patch[0])
    assert torch.equal(s["residual_hidden"][2], next_residual[0])
    assert s["positions"].tolist() == [5, 0, 10, 0]
    assert torch.equal(out[:, :6], patch.flatten(1)) and out[:, 6].tolist() == [1.0, 0.0]


def test_wrappers_refuse_mismatched_tensors():
    s = state()
    with pytest.raises(ValueError, match="index must be contiguous int64"):
        ops.step_gather(torch.zeros(2, 1, dtype=torch.int32), *s.values())
    with pytest.raises(ValueError, match="ring must be"):
        ops.step_gather(torch.zeros(2, 1, dtype=torch.int64), s["ring"].transpose(2, 3), *list(s.values())[1:])
    with pytest.raises(ValueError, match="stop_logits must be"):
        ops.step_scatter(torch.zeros(2, 1, dtype=torch.int64), torch.ones(1, dtype=torch.int32), torch.randn(1, 4),
                         torch.randn(1, 4), torch.randn(1, 2, 3), torch.randn(1, 3), s["lm_hidden"],
                         s["residual_hidden"], s["prev_patch"], s["positions"])
