"""Stateless windowed decode of latent patches to PCM.

The AudioVAE decoder is causal with a finite receptive field, so the samples of one new patch are
fully determined by that patch and `context_frames` latent frames before it. Decoding a window of
(left context + new patch) and keeping the new patch's samples therefore reproduces the offline
decode exactly, while holding no per-stream state: Triton's dynamic batcher can hand any mix of
streams to one `decode` call. At a stream's start the window is shorter (fewer patches exist); the
decoder's zero padding then plays the role of the missing past, exactly as in the offline decode.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
from torch import nn

from voxcpm_triton.audio.audio_vae import AudioVAE
from voxcpm_triton.audio.vae_layers import (
    CausalConv1d,
    CausalConvTranspose1d,
    DecoderBlock,
    ResidualUnit,
    SampleRateCondition,
    Snake1d,
)


def _context_through(module: nn.Module, context: int) -> int:
    """Samples of history needed at `module`'s input so that `context` samples of history plus the
    current ones at its output are exact."""
    if isinstance(module, CausalConv1d):
        if module.stride != 1:
            raise ValueError("strided causal convs do not occur in the decoder")
        return context + (module.kernel_size - 1) * module.dilation
    if isinstance(module, CausalConvTranspose1d):
        # Output sample n reads input frames floor(n/s)-1 and floor(n/s) (kernel 2s, stride s).
        return math.ceil(context / module.stride) + 1
    if isinstance(module, ResidualUnit):
        inner = context
        for layer in reversed(module.block):
            inner = _context_through(layer, inner)
        return max(context, inner)
    if isinstance(module, (DecoderBlock, nn.Sequential)):
        layers = module.block if isinstance(module, DecoderBlock) else module
        for layer in reversed(layers):
            context = _context_through(layer, context)
        return context
    if isinstance(module, SampleRateCondition):
        return context if module.out_layer is None else _context_through(module.out_layer, context)
    if isinstance(module, (Snake1d, nn.Tanh)):
        return context
    raise TypeError(f"no receptive-field rule for {type(module).__name__}")


def decoder_context_frames(audio_vae: AudioVAE) -> int:
    """Latent frames of left context the causal decoder reads for one output frame."""
    decoder = audio_vae.decoder
    context = 0
    for index in reversed(range(len(decoder.model))):
        context = _context_through(decoder.model[index], context)
        if decoder.sr_cond_model is not None and str(index) in decoder.sr_cond_model:
            context = _context_through(decoder.sr_cond_model[str(index)], context)
    return context


class WindowedVocoder:
    """decode(windows) -> PCM of each window's last patch; windows are [n, P, D] latent patches,
    the new patch last, 1 <= n <= window_patches."""

    def __init__(self, audio_vae: AudioVAE, patch_size: int) -> None:
        if patch_size < 1:
            raise ValueError(f"patch_size={patch_size}; must be >= 1")
        self.audio_vae = audio_vae
        self.patch_size = patch_size
        self.context_frames = decoder_context_frames(audio_vae)
        self.window_patches = 1 + math.ceil(self.context_frames / patch_size)
        self.samples_per_patch = patch_size * audio_vae.decode_hop_length
        self.sample_rate = audio_vae.sample_rate

    def _check(self, index: int, window: torch.Tensor) -> None:
        shape = tuple(window.shape)
        if window.ndim != 3 or shape[1:] != (self.patch_size, self.audio_vae.latent_dim):
            raise ValueError(
                f"windows[{index}] shape {shape}; expected [n, {self.patch_size}, {self.audio_vae.latent_dim}]"
            )
        if not 1 <= shape[0] <= self.window_patches:
            raise ValueError(f"windows[{index}] has {shape[0]} patches; allowed 1..{self.window_patches}")
        if not torch.isfinite(window).all():
            raise ValueError(f"windows[{index}] holds non-finite values")

    @torch.inference_mode()
    def decode(self, windows: Sequence[np.ndarray | torch.Tensor]) -> list[np.ndarray]:
        parameter = next(self.audio_vae.parameters())
        tensors = [torch.as_tensor(w, dtype=torch.float32) for w in windows]
        for index, window in enumerate(tensors):
            self._check(index, window)
        outputs: list[np.ndarray | None] = [None] * len(tensors)
        by_length: dict[int, list[int]] = {}
        for index, window in enumerate(tensors):
            by_length.setdefault(window.shape[0], []).append(index)
        # One decoder call per distinct window length: streams past their start all share the
        # full length, so a dynamic batch is mostly one call.
        for length, indices in by_length.items():
            batch = torch.stack([tensors[i] for i in indices]).to(parameter.device, parameter.dtype)
            latents = batch.permute(0, 3, 1, 2).reshape(len(indices), self.audio_vae.latent_dim, -1)
            audio = self.audio_vae.decode(latents)[:, 0, -self.samples_per_patch :]
            audio = audio.float().cpu().numpy()
            for row, index in enumerate(indices):
                outputs[index] = np.ascontiguousarray(audio[row])
        return outputs  # type: ignore[return-value]
