"""Tiny AudioVAEs for the vocoder tests: one v2 (depthwise units, sample-rate conditioning) and one
v1 (plain convs), with weight norm folded."""

from __future__ import annotations

import torch

from voxcpm_triton.audio.audio_vae import AudioVAE, build_audio_vae

# name -> (architecture, audio_vae_config, patch_size)
VAES = {
    "v2": ("voxcpm2", dict(encoder_dim=4, encoder_rates=[2, 5], latent_dim=8, decoder_dim=32,
                           decoder_rates=[5, 2, 3], sr_bin_boundaries=[20000, 30000, 40000]), 4),
    "v1": ("voxcpm", dict(encoder_dim=4, encoder_rates=[2, 5], latent_dim=8, decoder_dim=16,
                          decoder_rates=[5, 2], depthwise=False), 2),
}


def tiny_vae(name: str, random_biases: bool = False) -> tuple[AudioVAE, int]:
    """(folded AudioVAE in eval mode, its patch size). random_biases: biases and conditioning
    embeddings drawn nonzero, so code that folds them is exercised."""
    architecture, cfg, patch_size = VAES[name]
    torch.manual_seed(0)
    vae = build_audio_vae(cfg, architecture)
    with torch.no_grad():
        for param_name, param in vae.named_parameters():
            if param_name.endswith("weight_g"):
                # Default init grows activations to ~100 and saturates the tanh; smaller gains keep
                # them at speech-like levels, where fp32 rounding stays well under the tolerances.
                param.mul_(0.5)
            if random_biases and (param_name.endswith("bias") or "embed" in param_name):
                param.normal_(0, 0.1)
    return vae.fold_weight_norm().eval(), patch_size
