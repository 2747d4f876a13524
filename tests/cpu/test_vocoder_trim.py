"""WindowedVocoder's trimmed decode (the CUDA default, forced here on the CPU): cutting each
decoder layer's input to the history the later layers read gives the same samples as decoding the
whole window, for full and short windows, with and without sample-rate conditioning."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.cpu.tiny_vae import VAES, tiny_vae
from voxcpm_triton.audio.vocoder import WindowedVocoder


@pytest.mark.parametrize("name", sorted(VAES))
def test_trimmed_decode_equals_whole_window(name: str) -> None:
    vae, patch_size = tiny_vae(name)
    whole = WindowedVocoder(vae, patch_size, trim=False)
    trimmed = WindowedVocoder(vae, patch_size, trim=True)
    assert trimmed.dtype == whole.dtype == torch.float32
    rng = np.random.default_rng(3)
    windows = [rng.standard_normal((n, patch_size, 8)).astype(np.float32)
               for n in range(1, whole.window_patches + 1) for _ in range(2)]
    for a, b in zip(whole.decode(windows), trimmed.decode(windows)):
        assert a.shape == b.shape == (whole.samples_per_patch,)
        assert np.abs(a - b).max() <= 1e-5


def test_cpu_vocoder_keeps_float32_and_the_shared_decoder() -> None:
    vae, patch_size = tiny_vae("v2")
    vocoder = WindowedVocoder(vae, patch_size)
    assert vocoder.dtype == torch.float32 and not vocoder.trim and vocoder.decoder is vae.decoder


def test_bfloat16_copy_leaves_the_audio_vae_float32() -> None:
    vae, patch_size = tiny_vae("v2")
    vocoder = WindowedVocoder(vae, patch_size, dtype=torch.bfloat16, trim=True)
    assert next(vocoder.decoder.parameters()).dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in vae.parameters())
    window = np.random.default_rng(4).standard_normal((vocoder.window_patches, patch_size, 8)).astype(np.float32)
    chunk = vocoder.decode([window])[0]
    reference = WindowedVocoder(vae, patch_size).decode([window])[0]
    assert chunk.dtype == np.float32
    # bfloat16 keeps ~3 significant digits; through a few tiny layers the audio stays within 5%.
    assert np.sqrt(np.mean((chunk - reference) ** 2)) <= 0.05 * np.sqrt(np.mean(reference ** 2))
