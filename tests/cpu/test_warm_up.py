"""voxcpm_triton.serving.warm_up leaves the engine idle with every slot free, and the vocoder's
warm-up decode runs on both window lengths a stream can send."""

import numpy as np

from voxcpm_triton.audio.vocoder import WindowedVocoder
from voxcpm_triton.checkpoint.loader import load_checkpoint
from voxcpm_triton.checkpoint.make import make_checkpoint
from voxcpm_triton.engine.engine import Engine
from voxcpm_triton.serving.warm_up import warm_up_engine, warm_up_vocoder


def test_warm_up_leaves_the_engine_idle_and_usable(tmp_path):
    loaded = load_checkpoint(make_checkpoint(tmp_path / "tiny", "voxcpm2", size="tiny"))
    vocoder = WindowedVocoder(loaded.audio_vae, loaded.config.patch_size)
    engine = Engine(loaded.model, max_slots=2, max_context=256, device="cpu", window_patches=vocoder.window_patches)
    warm_up_engine(engine)
    assert engine.live_slots == 0 and not engine.has_work
    warm_up_engine(engine)  # the warm-up request id is free again
    assert not engine.has_work
    warm_up_vocoder(vocoder)
    chunk = vocoder.decode([np.zeros((1, loaded.config.patch_size, loaded.audio_vae.latent_dim), np.float32)])[0]
    assert chunk.shape == (vocoder.samples_per_patch,)
