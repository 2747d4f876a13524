"""WindowedVocoder's trimmed decode (the CUDA default, forced here on the CPU): cutting each
decoder layer's input to the history the later layers read gives the same samples as decoding the
whole window, for full and short windows, with and without sample-rate conditioning."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from voxcpm_triton.audio.audio_vae import build_audio_vae
from voxcpm_triton.audio.vocoder import WindowedVocoder

VAES = {
    "v2": ("voxcpm2", dict(encoder_dim=4, encoder_rates=[2, 5], latent_dim=8, decoder_dim=32,
                           decoder_rates=[5, 2, 3], sr_bin_boundaries=[20000, 30000, 40000]), 4),
    "v1": ("voxcpm", dict(encoder_dim=4, encoder_rates=[2, 5], latent_dim=8, decoder_dim=16,
                          decoder_rates=[5, 2], depthwise=False), 2),
}


def _vae(name: str):
    architecture, cfg, patch_size = VAES[name]
    torch.manual_seed(0)
    vae = build_audio_vae(cfg, architecture)
    with torch.no_grad():
        for param_name, param in vae.named_parameters():
            if param_name.endswith("weight_g"):
                param.mul_(0.5)  # keeps activations off the tanh's saturation, as in test_vocoder
    return vae.fold_weight_norm().eval(), patch_size


@pytest.mark.parametrize("name", sorted(VAES))
def test_trimmed_decode_equals_whole_window(name: str) -> None:
    vae, patch_size = _vae(name)
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
    vae, patch_size = _vae("v2")
    vocoder = WindowedVocoder(vae, patch_size)
    assert vocoder.dtype == torch.float32 and not vocoder.trim and vocoder.decoder is vae.decoder


def test_bfloat16_copy_leaves_the_audio_vae_float32() -> None:
    vae, patch_size = _vae("v2")
    vocoder = WindowedVocoder(vae, patch_size, dtype=torch.bfloat16, trim=True)
    assert next(vocoder.decoder.parameters()).dtype == torch.bfloat16
    assert all(p.dtype == torch.float32 for p in vae.parameters())
    window = np.random.default_rng(4).standard_normal((vocoder.window_patches, patch_size, 8)).astype(np.float32)
    chunk = vocoder.decode([window])[0]
    reference = WindowedVocoder(vae, patch_size).decode([window])[0]
    assert chunk.dtype == np.float32
    # bfloat16 keeps ~3 significant digits; through a few tiny layers the audio stays within 5%.
    assert np.sqrt(np.mean((chunk - reference) ** 2)) <= 0.05 * np.sqrt(np.mean(reference ** 2))
