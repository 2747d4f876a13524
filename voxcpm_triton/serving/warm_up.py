"""Run each model once at load time, so the first client request does not pay for lazy
initialisation (allocator growth, kernel selection, CUDA context work): measured on the H200, the
first request after start took ~40x longer than the next ones."""

from __future__ import annotations

import numpy as np

from voxcpm_triton.audio.vocoder import WindowedVocoder
from voxcpm_triton.engine.engine import Engine
from voxcpm_triton.engine.prefill import build_prefill
from voxcpm_triton.engine.request import GenerationRequest

WARM_UP_PATCHES = 2


def warm_up_engine(engine: Engine) -> None:
    """Generate a couple of patches for a one-token prompt; the engine is idle again afterwards."""
    config = engine.config
    sequence = build_prefill([config.audio_start_token - 1], None, None, config)
    engine.submit(GenerationRequest(
        "warm-up", sequence.tokens, sequence.feats, sequence.text_mask, sequence.audio_mask,
        sequence.context_patches, min_len=WARM_UP_PATCHES, max_len=WARM_UP_PATCHES, seed=0,
    ))
    while engine.has_work:
        for output in engine.step():
            if output.error:
                raise RuntimeError(f"warm-up generation failed: {output.error}")


def warm_up_vocoder(vocoder: WindowedVocoder) -> None:
    """Decode a first-patch window and a full window of silence-level latents."""
    shape = (vocoder.patch_size, vocoder.audio_vae.latent_dim)
    vocoder.decode([np.zeros((1, *shape), np.float32), np.zeros((vocoder.window_patches, *shape), np.float32)])
