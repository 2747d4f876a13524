"""Fixtures shared by the GPU tests."""

from __future__ import annotations

import copy

import pytest
import torch

from voxcpm_triton.audio.audio_vae import AudioVAE, build_audio_vae
from voxcpm_triton.checkpoint.make import config_dict, random_vae_state


@pytest.fixture
def no_tf32():
    """fp32 matmuls and convolutions in full fp32 for the test (tolerances assume it)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.fixture(scope="session")
def full_size_vae() -> AudioVAE:
    """The full-size VoxCPM2 AudioVAE with seeded random weights, weight norm folded, float32 on the
    CPU. Shared: tests that change or move it work on a copy."""
    config = config_dict("voxcpm2", "full")
    vae = build_audio_vae(config["audio_vae_config"], "voxcpm2")
    vae.load_state_dict(random_vae_state(config, seed=0))
    return vae.fold_weight_norm().eval()


@pytest.fixture(scope="session")
def gpu_vae(full_size_vae: AudioVAE) -> AudioVAE:
    """full_size_vae's CUDA copy, shared like it (vocoders cast or fuse their own decoder copies)."""
    return copy.deepcopy(full_size_vae).cuda()
