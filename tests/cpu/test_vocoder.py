"""WindowedVocoder: windowed decode concatenated equals the offline decode; the context it uses is
exactly the decoder's receptive field; mixed window lengths batch correctly; bad input is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.cpu.tiny_vae import VAES, tiny_vae
from voxcpm_triton.audio.vocoder import WindowedVocoder

TOLERANCE = 1e-5


def _vocoder(name: str) -> WindowedVocoder:
    return WindowedVocoder(*tiny_vae(name))


def _offline(vocoder: WindowedVocoder, patches: np.ndarray) -> np.ndarray:
    latents = torch.from_numpy(patches).permute(2, 0, 1).reshape(1, patches.shape[2], -1)
    with torch.no_grad():
        return vocoder.audio_vae.decode(latents)[0, 0].numpy()


def _windows(vocoder: WindowedVocoder, patches: np.ndarray, window_patches: int) -> list[np.ndarray]:
    return [patches[max(0, i + 1 - window_patches) : i + 1] for i in range(len(patches))]


@pytest.mark.parametrize("name", sorted(VAES))
def test_windowed_decode_equals_offline(name: str) -> None:
    vocoder = _vocoder(name)
    rng = np.random.default_rng(1)
    patches = rng.standard_normal((3 * vocoder.window_patches, vocoder.patch_size, 8)).astype(np.float32)
    chunks = vocoder.decode(_windows(vocoder, patches, vocoder.window_patches))
    assert all(chunk.shape == (vocoder.samples_per_patch,) and chunk.dtype == np.float32 for chunk in chunks)
    offline = _offline(vocoder, patches)
    error = np.abs(np.concatenate(chunks) - offline).max()
    assert error <= TOLERANCE, error
    assert np.abs(offline).mean() > 1e-3


@pytest.mark.parametrize("name", sorted(VAES))
def test_context_frames_is_the_receptive_field(name: str) -> None:
    vocoder = _vocoder(name)
    frames = 4 * vocoder.context_frames
    latents = torch.randn(1, 8, frames, generator=torch.Generator().manual_seed(2))
    hop = vocoder.audio_vae.decode_hop_length
    target = frames - 1
    with torch.no_grad():
        base = vocoder.audio_vae.decode(latents)[0, 0, target * hop :]

        def changed_by(frame: int) -> float:
            bumped = latents.clone()
            bumped[..., frame] += 3.0
            return (vocoder.audio_vae.decode(bumped)[0, 0, target * hop :] - base).abs().max().item()

        # The farthest frame's influence is small (a product of edge taps) but not zero; one
        # frame further has none at all, so context_frames (hence window_patches) is minimal.
        assert changed_by(target - vocoder.context_frames) > 0.0
        assert changed_by(target - vocoder.context_frames - 1) == 0.0
        assert changed_by(target - 1) > 1e-4


def test_mixed_lengths_in_one_call_match_single_calls() -> None:
    vocoder = _vocoder("v2")
    rng = np.random.default_rng(3)
    lengths = [vocoder.window_patches, 1, vocoder.window_patches, 2, vocoder.window_patches]
    windows = [rng.standard_normal((n, vocoder.patch_size, 8)).astype(np.float32) for n in lengths]
    batched = vocoder.decode(windows)
    for window, chunk in zip(windows, batched):
        alone = vocoder.decode([window])[0]
        assert np.abs(alone - chunk).max() <= TOLERANCE


@pytest.mark.parametrize(
    "window, message",
    [
        (np.zeros((1, 3, 8), np.float32), "shape"),
        (np.zeros((0, 4, 8), np.float32), "patches"),
        (np.full((1, 4, 8), np.nan, np.float32), "non-finite"),
    ],
)
def test_bad_windows_are_refused(window: np.ndarray, message: str) -> None:
    vocoder = _vocoder("v2")
    with pytest.raises(ValueError, match=message):
        vocoder.decode([np.zeros((1, 4, 8), np.float32), window])
    too_long = np.zeros((vocoder.window_patches + 1, 4, 8), np.float32)
    with pytest.raises(ValueError, match=r"windows\[0\]"):
        vocoder.decode([too_long])
