"""Prompt / reference audio -> latent patches, the way the reference prepares it.

Steps: validate (mono float PCM, finite, non-empty, long enough, supported rate), resample to the
AudioVAE encoder's rate, pad to whole patches (left for continuation prompts so the real audio ends
exactly where generation starts, right for VoxCPM2 reference audio), encode, reshape to [N, P, D].
The reference's optional VAD silence trimming (off by default) is not applied.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
import torch

from voxcpm_triton.audio.audio_vae import AudioVAE
from voxcpm_triton.audio.resample import resample

MIN_SAMPLE_RATE = 8000
MAX_SAMPLE_RATE = 192000
MIN_SECONDS = 0.1
MAX_SECONDS = 60.0

Padding = Literal["left", "right"]


def check_unit_range(name: str, samples: np.ndarray) -> None:
    """ValueError if finite `samples` leave [-1, 1]: mis-scaled audio (int16 values sent as floats,
    say) would be encoded into a voice of noise. The server and the in-process API refuse it where
    the audio comes in; check_audio does not, as the reference encodes whatever it is given."""
    magnitudes = np.abs(samples[np.isfinite(samples)])  # non-finite samples have checks of their own
    outside = int(np.count_nonzero(magnitudes > 1.0))
    if outside:
        peak = float(magnitudes.max())
        raise ValueError(f"{name} holds {outside} samples outside [-1, 1] (peak {peak:.4g}); send PCM scaled into it")


def check_audio(audio: np.ndarray | torch.Tensor, sample_rate: int, name: str = "prompt_audio") -> torch.Tensor:
    """Validated mono float32 waveform as a 1-D tensor; ValueError names `name` and the limit."""
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, (int, np.integer)):
        raise ValueError(f"{name} sample rate must be an integer in Hz, got {sample_rate!r}")
    if not MIN_SAMPLE_RATE <= int(sample_rate) <= MAX_SAMPLE_RATE:
        raise ValueError(
            f"{name} sample rate {int(sample_rate)} Hz is outside the supported {MIN_SAMPLE_RATE}-{MAX_SAMPLE_RATE} Hz"
        )
    if isinstance(audio, (list, tuple)):
        try:
            audio = np.asarray(audio, dtype=np.float32)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must hold float PCM in [-1, 1]; a sequence of numbers, got {audio[:3]!r}...") from None
    if isinstance(audio, np.ndarray):
        if audio.dtype.kind != "f" or audio.dtype.itemsize > 8:
            raise ValueError(f"{name} must hold float PCM in [-1, 1], got dtype {audio.dtype}")
        # Native byte order and positive strides, which torch requires (a big-endian WAV read, a
        # reversed view).
        audio = np.ascontiguousarray(audio, dtype=audio.dtype.newbyteorder("="))
    elif not isinstance(audio, torch.Tensor):
        raise ValueError(f"{name} must be a numpy array or a torch tensor of float PCM, got {type(audio).__name__}")
    tensor = torch.as_tensor(audio)
    if tensor.ndim == 2 and tensor.shape[0] == 1:
        tensor = tensor[0]
    if tensor.ndim != 1:
        raise ValueError(f"{name} must be mono audio of shape [samples] (or [1, samples]), got {tuple(tensor.shape)}")
    if not tensor.is_floating_point():
        raise ValueError(f"{name} must hold float PCM in [-1, 1], got dtype {tensor.dtype}")
    if tensor.numel() == 0:
        raise ValueError(f"{name} is empty")
    tensor = tensor.to(torch.float32)
    if not torch.isfinite(tensor).all():
        raise ValueError(f"{name} holds non-finite samples (NaN or inf)")
    seconds = tensor.numel() / int(sample_rate)
    # The sample count too: a length one sample off a limit would read as the limit itself.
    length = f"{name} lasts {seconds:g} s ({tensor.numel()} samples at {int(sample_rate)} Hz)"
    if seconds < MIN_SECONDS:
        raise ValueError(f"{length}; at least {MIN_SECONDS} s is needed")
    if seconds > MAX_SECONDS:
        raise ValueError(f"{length}; at most {MAX_SECONDS} s is accepted")
    return tensor


def pad_to_patches(audio: torch.Tensor, samples_per_patch: int, side: Padding) -> torch.Tensor:
    remainder = audio.shape[-1] % samples_per_patch
    if remainder == 0:
        return audio
    pad = samples_per_patch - remainder
    return torch.nn.functional.pad(audio, (pad, 0) if side == "left" else (0, pad))


@torch.inference_mode()
def encode_audio(audio_vae: AudioVAE, audio: np.ndarray | torch.Tensor, sample_rate: int, patch_size: int,
                 padding: Padding, name: str = "prompt_audio") -> torch.Tensor:
    """Waveform at any supported rate -> float32 latent patches [N, patch_size, latent_dim] (CPU)."""
    if padding not in ("left", "right"):
        raise ValueError(f"padding={padding!r}; allowed: 'left' (continuation prompt), 'right' (reference)")
    waveform = resample(check_audio(audio, sample_rate, name), int(sample_rate), audio_vae.encode_sample_rate,
                        audio_vae.spec.version)
    waveform = pad_to_patches(waveform, patch_size * audio_vae.hop_length, padding)
    parameter = next(audio_vae.parameters())
    latents = audio_vae.encode(waveform[None].to(parameter.device, parameter.dtype))[0]  # [D, frames]
    return latents.view(audio_vae.latent_dim, -1, patch_size).permute(1, 2, 0).float().cpu().contiguous()
