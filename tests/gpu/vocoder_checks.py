"""What the vocoder GPU tests share: random latent patches, the windows a stream sends, and the
bounds a decode is held to."""

from __future__ import annotations

import numpy as np

PATCH_SIZE = 4
LATENT_DIM = 64
# float32 windowed decode against the offline decode (and float32 paths against each other).
FP32_TOLERANCE = 1e-4
# bfloat16 vs float32 audio. On the CPU (same random weights, 0.5-scaled latents) bf16 measured a
# relative RMS error of 0.53% and a max abs error of 1.4e-3 at an audio RMS of 0.052; the bounds
# leave ~4x / ~7x headroom for cuDNN's different accumulation order.
BF16_RELATIVE_RMS = 2e-2
BF16_MAX_ABS = 1e-2


def _latent_patches(rng: np.random.Generator, count: int) -> np.ndarray:
    return (0.5 * rng.standard_normal((count, PATCH_SIZE, LATENT_DIM))).astype(np.float32)


def patches(count: int, seed: int) -> np.ndarray:
    """count latent patches [count, PATCH_SIZE, LATENT_DIM], 0.5-scaled normal."""
    return _latent_patches(np.random.default_rng(seed), count)


def stream_windows(stream: np.ndarray, window_patches: int) -> list[np.ndarray]:
    """The windows one stream sends, patch by patch: the first ones short, then full."""
    return [stream[max(0, i + 1 - window_patches): i + 1] for i in range(len(stream))]


def full_windows(count: int, window_patches: int, seed: int) -> list[np.ndarray]:
    """count independent full-length windows (as many streams in mid-utterance)."""
    rng = np.random.default_rng(seed)
    return [_latent_patches(rng, window_patches) for _ in range(count)]


def audio_errors(audio: np.ndarray, expected: np.ndarray) -> tuple[float, float]:
    """(RMS of the difference relative to the expected audio's RMS, max abs difference)."""
    return (float(np.sqrt(np.mean((audio - expected) ** 2)) / np.sqrt(np.mean(expected**2))),
            float(np.abs(audio - expected).max()))
