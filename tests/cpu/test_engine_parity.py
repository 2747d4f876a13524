"""End to end: our engine at batch 1 reproduces the reference `_inference` loop (latent patches,
stop decision, length) on the same tiny weights and seed, for every prompt mode."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.cpu.engine_harness import make_request, model_pair, reference_patches, run_to_completion
from tests.reference_shim import import_reference
from voxcpm_triton.engine.engine import Engine

pytestmark = pytest.mark.skipif(import_reference() is None, reason="reference voxcpm not installed")

TOLERANCE = 1e-4  # fp32 max abs error over all patches


@pytest.fixture(scope="module", params=["voxcpm2", "voxcpm1.5", "voxcpm0.5b"])
def pair(request):
    return model_pair(request.param)


MODES = ["zero_shot", "reference", "continuation", "combined"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed,timesteps,cfg_value,min_len", [(0, 10, 2.0, 2), (5, 5, 1.5, 5)])
def test_batch_one_matches_reference(pair, mode, seed, timesteps, cfg_value, min_len):
    reference, ours = pair
    config = ours.config
    if mode in ("reference", "combined") and not config.is_v2:
        pytest.skip("reference-audio modes exist only in VoxCPM2")
    gen = torch.Generator().manual_seed(100 + seed)
    text = torch.randint(110, config.lm.vocab_size, (7,), generator=gen)
    ref = torch.randn(3, config.patch_size, config.feat_dim, generator=gen) if mode in ("reference", "combined") else None
    prompt = torch.randn(5, config.patch_size, config.feat_dim, generator=gen) if mode in ("continuation", "combined") else None
    request = make_request(ours, "r", text, ref, prompt, min_len=min_len, max_len=12, timesteps=timesteps,
                           cfg_value=cfg_value, seed=seed)
    expected = reference_patches(reference, request, min_len, 12, timesteps, cfg_value, seed)
    engine = Engine(ours, max_slots=2, max_context=config.max_length, device="cpu", window_patches=4)
    got = run_to_completion(engine, [request])["r"]
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= TOLERANCE
