"""VoxCPMModel.prefill(with_audio=False), the zero-shot admission path that skips LocEnc and FSQ,
gives exactly what the full prefill gives when no prompt position is audio."""

from __future__ import annotations

import pytest
import torch

from tests.cpu.tiny_reference import tiny_config_dict
from voxcpm_triton.config import parse_config
from voxcpm_triton.engine.prefill import build_prefill
from voxcpm_triton.engine.runner import with_audio
from voxcpm_triton.model.voxcpm import build_model


@torch.inference_mode()
@pytest.mark.parametrize("variant", ["voxcpm2", "voxcpm1.5", "voxcpm0.5b"])
def test_text_only_prefill_equals_the_full_one(variant):
    config = parse_config(tiny_config_dict(variant))
    torch.manual_seed(0)
    model = build_model(config).eval()
    prompts = [build_prefill(torch.randint(10, 200, (n,)), None, None, config) for n in (5, 9)]
    assert not any(p.audio_mask.any() for p in prompts)
    length = max(p.tokens.shape[0] for p in prompts)

    def stack(name: str) -> torch.Tensor:
        parts = [getattr(p, name) for p in prompts]
        out = torch.zeros((len(parts), length) + parts[0].shape[1:], dtype=parts[0].dtype)
        for row, part in enumerate(parts):
            out[row, :part.shape[0]] = part
        return out

    inputs = [stack(name) for name in ("tokens", "feats", "text_mask", "audio_mask")]
    full = model.prefill(*inputs, with_audio=True)
    text_only = model.prefill(*inputs, with_audio=False)
    assert torch.equal(full.lm_hidden, text_only.lm_hidden)
    assert torch.equal(full.residual_hidden, text_only.residual_hidden)
    for (k, v), (k2, v2) in zip(full.base_kv + full.residual_kv, text_only.base_kv + text_only.residual_kv):
        assert torch.equal(k, k2) and torch.equal(v, v2)


def test_with_audio_looks_at_every_admitted_prompt():
    class Request:
        def __init__(self, audio: bool):
            self.audio_mask = torch.tensor([0, 1 if audio else 0, 0])

    class Stream:
        def __init__(self, audio: bool):
            self.request = Request(audio)

    assert not with_audio([Stream(False), Stream(False)])
    assert with_audio([Stream(False), Stream(True)])
