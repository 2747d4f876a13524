"""Band-limited resampling of mono PCM in torch: Kaiser-windowed sinc interpolation.

Every output sample j sits at input position j * orig / new (exact rational arithmetic) and is the
windowed-sinc weighted sum of the input samples around it; the sinc's cutoff is the lower of the two
Nyquist rates (times a roll-off), so downsampling is anti-aliased. With the rates reduced by their
gcd, output j's weights depend on j mod new only, so common rate pairs run as one strided conv1d
over a bank of `new` phase kernels; co-prime rates (a bank too large) compute weights per sample.

The reference reads prompt audio with librosa.load(sr=...), which resamples with soxr (HQ). This
filter is a different design (32 zero crossings, Kaiser beta 8.6, roll-off 0.95: about -80 dB stop
band), so prompts at a rate other than the encoder's give latents that differ slightly from the
reference's; prompts already at the encoder rate are passed through untouched and match exactly.
Measured against soxr 1.1 HQ (-> 16 kHz from 8/22.05/24/44.1/48 kHz, 2 s): tones below 3.2 kHz agree
within 3.3e-6 (max abs); with white noise added (0.02 rms) the outputs differ by 6e-4..1e-3 rms
(about -45 dB of the signal), all of it from content in the two filters' different transition
bands just below the new Nyquist rate.
"""

from __future__ import annotations

import math

import torch

ZERO_CROSSINGS = 32
KAISER_BETA = 8.6
ROLLOFF = 0.95
_CHUNK = 1 << 15  # output samples per step of the direct path: bounds its [chunk, taps] matrices
_MAX_PHASES = 4096  # largest kernel bank (new rate / gcd) built for the polyphase path
_MAX_KERNEL = 1 << 22  # elements of a kernel bank built whole (16 MB); larger banks go in blocks


def output_length(num_samples: int, orig_rate: int, new_rate: int) -> int:
    return math.ceil(num_samples * new_rate / orig_rate)


def resample(audio: torch.Tensor, orig_rate: int, new_rate: int) -> torch.Tensor:
    """audio: float [T] at orig_rate -> float32 [ceil(T * new / orig)] at new_rate."""
    if audio.ndim != 1:
        raise ValueError(f"resample expects 1-D audio, got shape {tuple(audio.shape)}")
    if orig_rate <= 0 or new_rate <= 0:
        raise ValueError(f"sample rates must be positive, got {orig_rate} -> {new_rate}")
    if orig_rate == new_rate:
        return audio.to(torch.float32)
    gcd = math.gcd(orig_rate, new_rate)
    orig, new = orig_rate // gcd, new_rate // gcd
    cutoff = min(1.0, new / orig) * ROLLOFF  # fraction of the input Nyquist rate
    half_width = ZERO_CROSSINGS / cutoff  # in input samples
    taps = 2 * math.ceil(half_width) + 1
    offsets = torch.arange(taps, dtype=torch.int64) - math.ceil(half_width)

    total = output_length(audio.shape[0], orig_rate, new_rate)
    signal = audio.to(torch.float32)
    if new <= _MAX_PHASES:
        return _polyphase(signal, orig, new, offsets, cutoff, half_width, total)
    return _direct(signal, orig, new, offsets, cutoff, half_width, total)


def _polyphase(signal: torch.Tensor, orig: int, new: int, offsets: torch.Tensor, cutoff: float,
               half_width: float, total: int) -> torch.Tensor:
    """Output j = k*new + p reads inputs from k*orig + floor(p*orig/new) on, with phase p's
    weights: a strided conv1d whose output channels are the phases. The bank's kernel spans
    ~orig input samples per phase; where that would be large (odd rates: 191996 Hz -> 16 kHz is a
    [4000, 48000] kernel, 0.8 GB and mostly zeros) the phases go in blocks whose spans stay near
    the filter's length."""
    phases = torch.arange(new, dtype=torch.int64)
    weights = _weights(phases, orig, new, offsets, cutoff, half_width)  # [new, taps]
    starts = torch.div(phases * orig, new, rounding_mode="floor")
    taps = offsets.shape[0]
    frames = math.ceil(total / new)
    left = -int(offsets[0])
    right = (frames - 1) * orig + int(starts[-1]) + taps - left - signal.shape[0]
    padded = torch.nn.functional.pad(signal, (left, max(right, 0)))
    block = new if new * (int(starts[-1]) + taps) <= _MAX_KERNEL else max(1, min(new, taps * new // orig))
    out = torch.empty(new, frames)
    for first in range(0, new, block):
        rows = phases[first:first + block] - first
        shift = starts[first:first + block] - int(starts[first])
        kernel = torch.zeros(rows.shape[0], int(shift[-1]) + taps)
        kernel[rows[:, None], shift[:, None] + torch.arange(taps)[None, :]] = weights[first:first + block]
        segment = padded[int(starts[first]):]
        out[first:first + block] = torch.nn.functional.conv1d(segment[None, None], kernel[:, None, :],
                                                              stride=orig)[0, :, :frames]
    return out.T.reshape(-1)[:total].contiguous()


def _direct(signal: torch.Tensor, orig: int, new: int, offsets: torch.Tensor, cutoff: float,
            half_width: float, total: int) -> torch.Tensor:
    """Co-prime rates (too many phases for a kernel bank): weights per output sample, in chunks."""
    pad = -int(offsets[0])
    padded = torch.nn.functional.pad(signal, (pad, pad + 1))
    pieces = []
    for start in range(0, total, _CHUNK):
        j = torch.arange(start, min(start + _CHUNK, total), dtype=torch.int64)
        base = torch.div(j * orig, new, rounding_mode="floor")
        weights = _weights(j, orig, new, offsets, cutoff, half_width)
        pieces.append((padded[base[:, None] + offsets[None, :] + pad] * weights).sum(dim=1))
    return torch.cat(pieces)


def _weights(j: torch.Tensor, orig: int, new: int, offsets: torch.Tensor, cutoff: float,
             half_width: float) -> torch.Tensor:
    """[len(j), taps] float32 interpolation weights of output samples j over input offsets."""
    numerator = j * orig  # input position = numerator / new
    frac = (numerator - torch.div(numerator, new, rounding_mode="floor") * new).to(torch.float64) / new
    distance = offsets[None, :].to(torch.float64) - frac[:, None]  # input index - output position
    inside = distance.abs() <= half_width
    window = torch.special.i0(KAISER_BETA * torch.sqrt((1 - (distance / half_width) ** 2).clamp(min=0.0)))
    window = window / torch.special.i0(torch.tensor(KAISER_BETA, dtype=torch.float64))
    weights = cutoff * torch.sinc(cutoff * distance) * window
    return torch.where(inside, weights, torch.zeros_like(weights)).to(torch.float32)
