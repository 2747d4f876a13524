"""voxcpm_triton.serving.request_tensors: the text_encoder -> ar_decoder wire format round-trips a
GenerationRequest and rejects inconsistent tensors by name."""

import numpy as np
import pytest
import torch

from voxcpm_triton.engine.request import GenerationRequest, runaway_guard_max_len
from voxcpm_triton.serving.inputs import InputError
from voxcpm_triton.serving.request_tensors import from_wire, to_wire


def _request(max_len=None, target_text_tokens=None) -> GenerationRequest:
    generator = torch.Generator().manual_seed(0)
    return GenerationRequest(
        request_id="r",
        tokens=torch.tensor([5, 6, 101, 0]),
        feats=torch.randn(4, 2, 3, generator=generator),
        text_mask=torch.tensor([1, 1, 1, 0], dtype=torch.int32),
        audio_mask=torch.tensor([0, 0, 0, 1], dtype=torch.int32),
        context_patches=torch.randn(1, 2, 3, generator=generator),
        min_len=2,
        max_len=max_len,
        cfg_value=1.5,
        timesteps=7,
        seed=2**62 + 3,
        target_text_tokens=target_text_tokens,
    )


def test_round_trip_keeps_every_field():
    original = _request(max_len=40)
    wire = to_wire(original)
    assert all(array.shape[0] == 1 for array in wire.values()), "batched models return a leading dim of 1"
    back = from_wire(wire, "stream-1")
    assert back.request_id == "stream-1"
    for name in ("tokens", "feats", "text_mask", "audio_mask", "context_patches"):
        assert torch.equal(getattr(back, name), getattr(original, name)), name
    assert (back.min_len, back.max_len, back.cfg_value, back.timesteps, back.seed) == (2, 40, 1.5, 7, 2**62 + 3)


def test_runaway_guard_is_folded_into_max_len():
    back = from_wire(to_wire(_request(max_len=None, target_text_tokens=3)), "s")
    assert back.max_len == runaway_guard_max_len(3)
    assert from_wire(to_wire(_request()), "s").max_len is None


def test_unbatched_arrays_are_accepted():
    wire = {name: array[0] for name, array in to_wire(_request(max_len=5)).items()}
    assert from_wire(wire, "s").max_len == 5


def test_mismatched_lengths_are_named():
    wire = to_wire(_request())
    wire["TEXT_MASK"] = wire["TEXT_MASK"][:, :3]
    with pytest.raises(InputError, match="TEXT_MASK has 3 positions; TOKENS has 4"):
        from_wire(wire, "s")


def test_missing_and_non_finite_tensors_are_named():
    wire = to_wire(_request())
    del wire["NOISE_SEED"]
    with pytest.raises(InputError, match="missing input tensors: NOISE_SEED"):
        from_wire(wire, "s")
    wire = to_wire(_request())
    wire["FEATS"][0, 0, 0, 0] = np.nan
    with pytest.raises(InputError, match="non-finite"):
        from_wire(wire, "s")
