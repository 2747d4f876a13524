"""perf.force_length zeroes exactly the stop head inside a safetensors file, in place."""

from __future__ import annotations

import torch
from safetensors.torch import load_file, save_file

from perf.force_length import STOP_HEAD, main, tensor_byte_range


def test_zeroes_only_the_stop_head(tmp_path):
    tensors = {
        "a.weight": torch.randn(3, 5, dtype=torch.bfloat16),
        STOP_HEAD: torch.randn(2, 7, dtype=torch.bfloat16),
        "z.bias": torch.randn(4),
    }
    save_file(tensors, tmp_path / "model.safetensors")
    start, end = tensor_byte_range(tmp_path / "model.safetensors", STOP_HEAD)
    assert end - start == 2 * 7 * 2
    assert main([str(tmp_path)]) == 0
    loaded = load_file(tmp_path / "model.safetensors")
    assert torch.count_nonzero(loaded[STOP_HEAD]) == 0
    assert torch.equal(loaded["a.weight"], tensors["a.weight"])
    assert torch.equal(loaded["z.bias"], tensors["z.bias"])
    # argmax over two equal logits picks "continue" (index 0), which is what forces the length
    logits = loaded[STOP_HEAD].float() @ torch.randn(7, 4)
    assert torch.all(logits.argmax(dim=0) == 0)
