"""Prompt audio resampled to the AudioVAE encoder's rate the way the reference reads prompts, so that
a prompt at any supported rate gives the reference's latents, not only one already at the encoder's.

- VoxCPM2: the reference loads prompts with librosa.load(sr=...), which resamples with soxr at its HQ
  setting and then cuts or zero-pads the result to ceil(n * new / orig) samples (librosa.resample's
  fix_length). soxr does the same here.
- VoxCPM1.x: the reference loads prompts with torchaudio and resamples with
  torchaudio.functional.resample's defaults: windowed-sinc interpolation with a Hann window over 6
  zero crossings, its cutoff at 0.99 of the lower of the two Nyquist rates, run as a polyphase
  strided convolution over the rates reduced by their gcd; ceil(n * new / orig) samples. `sinc_hann`
  computes that filter bank and convolution in the same float32 steps.

A VoxCPM1.x bank holds one filter per output phase, each spanning the stride plus the filter's length:
odd rates make it huge (191996 Hz -> 44.1 kHz: 11025 phases x 48053 taps, 2 GB) and nearly all of it
the clamped window's ~1e-17 tails. Such banks are built and applied in blocks of phases, each over the
taps its phases reach (the tails beyond are left out: a change far below float32 resolution).
"""

from __future__ import annotations

import math

import numpy as np
import torch

ZERO_CROSSINGS = 6
ROLLOFF = 0.99
MAX_BANK = 1 << 22  # elements of a VoxCPM1.x filter bank built whole (16 MB); larger ones go in blocks


def output_length(num_samples: int, orig_rate: int, new_rate: int, version: int) -> int:
    """Samples out, as each reference counts them: librosa's ceil(n * (new / orig)) in float64, and
    torchaudio's ceil of (new / gcd) * n / (orig / gcd) rounded to float32 first (a sample fewer for
    about one long prompt in twenty at 48 -> 44.1 kHz)."""
    if version == 2:
        return int(np.ceil(num_samples * (float(new_rate) / orig_rate)))
    gcd = math.gcd(orig_rate, new_rate)
    return int(torch.ceil(torch.tensor(new_rate // gcd * num_samples / (orig_rate // gcd), dtype=torch.float32)))


def resample(audio: torch.Tensor, orig_rate: int, new_rate: int, version: int) -> torch.Tensor:
    """audio: float [T] at orig_rate -> float32 [ceil(T * new / orig)] at new_rate, as the reference
    of AudioVAE `version` (2: VoxCPM2, 1: VoxCPM1.x) resamples a prompt."""
    if audio.ndim != 1:
        raise ValueError(f"resample expects 1-D audio, got shape {tuple(audio.shape)}")
    if orig_rate <= 0 or new_rate <= 0:
        raise ValueError(f"sample rates must be positive, got {orig_rate} -> {new_rate}")
    if version not in (1, 2):
        raise ValueError(f"version={version}; allowed: 1 (VoxCPM1.x), 2 (VoxCPM2)")
    signal = audio.to(torch.float32)
    if orig_rate == new_rate:
        return signal
    if version == 2:
        return soxr_hq(signal, orig_rate, new_rate)
    return sinc_hann(signal, orig_rate, new_rate)


def soxr_hq(signal: torch.Tensor, orig_rate: int, new_rate: int) -> torch.Tensor:
    # Imported here: only a VoxCPM2 prompt at another rate than the encoder's needs it, and a process
    # that never resamples one (a GPU image without the package) still imports this module.
    import soxr

    out = soxr.resample(signal.cpu().numpy(), orig_rate, new_rate, quality="soxr_hq")
    length = output_length(signal.shape[0], orig_rate, new_rate, 2)
    out = out[:length] if out.shape[0] >= length else np.pad(out, (0, length - out.shape[0]))
    return torch.from_numpy(np.ascontiguousarray(out, dtype=np.float32)).to(signal.device)


def sinc_hann(signal: torch.Tensor, orig_rate: int, new_rate: int) -> torch.Tensor:
    gcd = math.gcd(orig_rate, new_rate)
    orig, new = orig_rate // gcd, new_rate // gcd
    cutoff = min(orig, new) * ROLLOFF  # in cycles per `orig` input samples
    width = math.ceil(ZERO_CROSSINGS * orig / cutoff)  # input samples the filter reaches on each side
    taps = 2 * width + orig  # every phase's filter, in the whole bank
    padded = torch.nn.functional.pad(signal[None], (width, width + orig))[0]
    frames = (padded.shape[0] - taps) // orig + 1
    out = torch.empty(new, frames)
    block = new
    if new * taps > MAX_BANK:  # blocks of phases, each bank ~1 MB: few enough calls, little of it zeros
        while block > 1 and block * (block * orig // new + 2 * width + 2) > MAX_BANK // 16:
            block //= 2
    for first in range(0, new, block):
        last = min(new, first + block)
        # Phase p's filter is centred p * orig / new samples into its window: the block's reach the
        # whole window, or (in blocks) from its first phase's centre to its last one's plus 2 * width.
        lo = 0 if block == new else first * orig // new
        hi = taps if block == new else min(taps, (last - 1) * orig // new + 2 * width + 2)
        bank = _bank(first, last, lo, hi, orig, new, width, cutoff)
        out[first:last] = torch.nn.functional.conv1d(padded[None, None, lo:], bank[:, None, :],
                                                     stride=orig)[0, :, :frames]
    return out.T.reshape(-1)[:output_length(signal.shape[0], orig_rate, new_rate, 1)].contiguous()


def _bank(first: int, last: int, lo: int, hi: int, orig: int, new: int, width: int, cutoff: float) -> torch.Tensor:
    """Filters [last - first, hi - lo] of phases first..last-1 over window taps lo..hi-1 (float32)."""
    offsets = torch.arange(lo - width, hi - width, dtype=torch.float32)[None, :] / orig
    phases = torch.arange(-first, -last, -1, dtype=torch.float32)[:, None] / new
    t = (phases + offsets) * cutoff
    t = t.clamp(-ZERO_CROSSINGS, ZERO_CROSSINGS)
    window = torch.cos(t * math.pi / ZERO_CROSSINGS / 2) ** 2
    t = t * math.pi
    return torch.where(t == 0, torch.tensor(1.0), t.sin() / t) * (window * (cutoff / orig))
