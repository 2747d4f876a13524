"""A LoRA adapter merged on the GPU, as the served decoder loads it (the checkpoint's tensors read
onto the device, merged in float32 there, then rounded to bfloat16), gives the weights the CPU merge
gives, rounded the same way (to one bfloat16 step: the two float32 products may round apart)."""

from __future__ import annotations

import pytest
import torch

from tests.lora_adapters import random_pairs, write_adapter
from voxcpm_triton.checkpoint.loader import load_checkpoint
from voxcpm_triton.checkpoint.make import make_checkpoint

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.usefixtures("no_tf32"),
]


def test_merge_on_the_gpu_equals_the_cpu_merge(tmp_path):
    folder = make_checkpoint(tmp_path / "tiny", "voxcpm2", size="tiny")
    pairs = random_pairs(folder, ("base_lm.", "residual_lm.", "feat_decoder.estimator."), r=8, scale=1.0, seed=0)
    adapter = write_adapter(tmp_path / "adapter", pairs, {"enable_lm": True, "enable_dit": True})

    on_gpu = load_checkpoint(folder, dtype=torch.bfloat16, device="cuda", lora=adapter).model.state_dict()
    on_cpu = load_checkpoint(folder, dtype=torch.bfloat16, device="cpu", lora=adapter).model.state_dict()
    plain = load_checkpoint(folder, dtype=torch.bfloat16, device="cpu").model.state_dict()
    changed = 0
    for name, value in on_cpu.items():
        torch.testing.assert_close(on_gpu[name].cpu().float(), value.float(), rtol=2**-7, atol=1e-6, msg=name)
        changed += not torch.equal(value, plain[name])
    assert changed == len(pairs) // 2
