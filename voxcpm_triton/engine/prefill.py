"""Prompt sequence construction, identical to the reference for its four prompt modes.

Positions hold either a text token (text_mask 1) or an audio latent patch (audio_mask 1); the LM input
at each position is the masked sum of the token embedding and the LocEnc patch embedding.

- zero-shot:    text+[audio_start]
- reference:    [ref_start] ref patches [ref_end] text+[audio_start]          (VoxCPM2 only)
- continuation: text+[audio_start] prompt patches                            (text = prompt_text + target)
- combined:     [ref_start] ref patches [ref_end] text+[audio_start] prompt patches
Reference audio is a voice to imitate but not to continue; prompt audio is continued.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from voxcpm_triton.config import ModelConfig


@dataclass
class PrefillSequence:
    tokens: torch.Tensor  # int64 [T]
    feats: torch.Tensor  # float32 [T, P, D]
    text_mask: torch.Tensor  # int32 [T]
    audio_mask: torch.Tensor  # int32 [T]
    context_patches: torch.Tensor  # float32 [C, P, D]


def context_length(config: ModelConfig) -> int:
    """Trailing prompt patches the reference keeps as decode context (streaming_prefix_len - 1)."""
    return 3 if config.is_v2 else 2


def _segment(tokens: torch.Tensor, feats: torch.Tensor, is_text: bool):
    mask = torch.ones(tokens.shape[0], dtype=torch.int32)
    zero = torch.zeros_like(mask)
    return tokens, feats, (mask if is_text else zero), (zero if is_text else mask)


def _check_latents(latents: torch.Tensor, name: str, config: ModelConfig) -> torch.Tensor:
    if latents.dim() != 3 or tuple(latents.shape[1:]) != (config.patch_size, config.feat_dim) or latents.shape[0] == 0:
        raise ValueError(f"{name} must have shape [N>0, {config.patch_size}, {config.feat_dim}], "
                         f"got {tuple(latents.shape)}")
    return latents.to(torch.float32)


def build_prefill(text_tokens: torch.Tensor | list[int], ref_latents: torch.Tensor | None,
                  prompt_latents: torch.Tensor | None, config: ModelConfig) -> PrefillSequence:
    """text_tokens: token ids of the text to read (prompt_text + target_text when prompt_latents
    are given), without the audio-start token; latents [N, P, D] or None."""
    text = torch.as_tensor(text_tokens, dtype=torch.int64).flatten()
    if text.numel() == 0:
        raise ValueError("text_tokens must not be empty")
    patch_shape = (config.patch_size, config.feat_dim)
    text = torch.cat((text, torch.tensor([config.audio_start_token])))
    segments = [_segment(text, torch.zeros(text.shape[0], *patch_shape), is_text=True)]
    if ref_latents is not None:
        if not config.is_v2:
            raise ValueError(f"reference audio (voice isolation) needs a VoxCPM2 checkpoint, this one is "
                             f"{config.variant}; pass it as prompt audio with its text instead")
        ref = _check_latents(ref_latents, "ref_latents", config)
        marker = torch.zeros(1, *patch_shape)
        segments.insert(0, _segment(torch.tensor([config.ref_audio_end_token]), marker, is_text=True))
        segments.insert(0, _segment(torch.zeros(ref.shape[0], dtype=torch.int64), ref, is_text=False))
        segments.insert(0, _segment(torch.tensor([config.ref_audio_start_token]), marker, is_text=True))
    context = torch.zeros(0, *patch_shape)
    if prompt_latents is not None:
        prompt = _check_latents(prompt_latents, "prompt_latents", config)
        segments.append(_segment(torch.zeros(prompt.shape[0], dtype=torch.int64), prompt, is_text=False))
        context = prompt[-context_length(config):].clone()
    tokens, feats, text_mask, audio_mask = (torch.cat(parts) for parts in zip(*segments))
    return PrefillSequence(tokens, feats, text_mask, audio_mask, context)
