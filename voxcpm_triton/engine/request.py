"""What a caller hands the engine (GenerationRequest) and what it gets back per step (StepOutput)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

# The reference caps generation at 6 patches per target-text token plus 10 (its
# retry_badcase_ratio_threshold logic), which also stops runaway output on very short texts.
PATCHES_PER_TEXT_TOKEN = 6.0
EXTRA_PATCHES = 10

# Sampling defaults (the reference's) and allowed ranges, inclusive; the server's tensors, the
# in-process API, the frontend and the engine's start-up graphs share them.
CFG_VALUE_DEFAULT = 2.0
TIMESTEPS_DEFAULT = 10
CFG_VALUE_RANGE = (0.0, 10.0)
TIMESTEPS_RANGE = (1, 100)
SEED_RANGE = (0, 2**63 - 1)


def runaway_guard_max_len(target_text_tokens: int, requested: int | None = None) -> int:
    """The reference's effective max_len: min(requested, int(6 * target text tokens + 10))."""
    if target_text_tokens < 0:
        raise ValueError(f"target_text_tokens must be >= 0, got {target_text_tokens}")
    guard = int(target_text_tokens * PATCHES_PER_TEXT_TOKEN + EXTRA_PATCHES)
    return guard if requested is None else min(guard, requested)


@dataclass
class GenerationRequest:
    """One stream's prompt and sampling settings.

    tokens/text_mask/audio_mask: [T]; feats: [T, P, D] (zeros at text positions);
    context_patches: [C, P, D] trailing prompt patches that precede the first generated patch
    (continuation modes; left context for the vocoder), may be empty.
    min_len: the stop head is obeyed only after more than min_len patches (reference: `i > min_len`).
    max_len: most patches to generate (None: only the runaway guard and the context cap apply).
    target_text_tokens: token count of the text to speak; when set, max_len is also capped by
    `runaway_guard_max_len`.
    """

    request_id: str
    tokens: torch.Tensor
    feats: torch.Tensor
    text_mask: torch.Tensor
    audio_mask: torch.Tensor
    context_patches: torch.Tensor
    min_len: int = 2
    max_len: int | None = None
    cfg_value: float = CFG_VALUE_DEFAULT
    timesteps: int = TIMESTEPS_DEFAULT
    seed: int = 0
    target_text_tokens: int | None = None

    @property
    def prompt_length(self) -> int:
        return int(self.tokens.shape[0])

    def patch_budget(self, max_context: int) -> int:
        """Most patches this stream may produce: its max_len, the runaway guard, and the KV room
        left after the prompt (step i writes cache row prompt_length + i)."""
        budget = max_context - self.prompt_length
        if self.max_len is not None:
            budget = min(budget, self.max_len)
        if self.target_text_tokens is not None:
            budget = min(budget, runaway_guard_max_len(self.target_text_tokens))
        return budget

    def validate(self, patch_size: int, feat_dim: int, vocab_size: int, max_context: int) -> None:
        """Raise ValueError naming the field and its allowed range."""
        if not isinstance(self.request_id, str) or not self.request_id:
            raise ValueError("request_id must be a non-empty string")
        if (self.tokens.dim() != 1 or self.tokens.shape[0] == 0
                or self.tokens.dtype not in (torch.int64, torch.int32)):
            raise ValueError(f"tokens must be a non-empty 1-D integer tensor, got {tuple(self.tokens.shape)} "
                             f"{self.tokens.dtype}")
        length = self.prompt_length
        low, high = int(self.tokens.min()), int(self.tokens.max())
        if low < 0 or high >= vocab_size:
            raise ValueError(f"tokens must lie in [0, {vocab_size}), got values in [{low}, {high}]")
        if tuple(self.feats.shape) != (length, patch_size, feat_dim):
            raise ValueError(f"feats must have shape [{length}, {patch_size}, {feat_dim}], got {tuple(self.feats.shape)}")
        if not torch.isfinite(self.feats).all():
            raise ValueError("feats must be finite")
        for name in ("text_mask", "audio_mask"):
            mask = getattr(self, name)
            if tuple(mask.shape) != (length,):
                raise ValueError(f"{name} must have shape [{length}], got {tuple(mask.shape)}")
        if ((self.text_mask != 0) & (self.audio_mask != 0)).any():
            raise ValueError("text_mask and audio_mask must not both be set at one position")
        if self.context_patches.dim() != 3 or tuple(self.context_patches.shape[1:]) != (patch_size, feat_dim):
            raise ValueError(f"context_patches must have shape [C, {patch_size}, {feat_dim}], "
                             f"got {tuple(self.context_patches.shape)}")
        if length >= max_context:
            raise ValueError(f"prompt of {length} positions leaves no room in a context of {max_context}")
        if self.min_len < 0:
            raise ValueError(f"min_len must be >= 0, got {self.min_len}")
        if self.max_len is not None and self.max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {self.max_len}")
        if self.target_text_tokens is not None and self.target_text_tokens < 0:
            raise ValueError(f"target_text_tokens must be >= 0, got {self.target_text_tokens}")
        low, high = CFG_VALUE_RANGE
        if not (math.isfinite(self.cfg_value) and low <= self.cfg_value <= high):
            raise ValueError(f"cfg_value must be in [{low:g}, {high:g}], got {self.cfg_value}")
        low, high = TIMESTEPS_RANGE
        if not low <= self.timesteps <= high:
            raise ValueError(f"timesteps must be in [{low}, {high}], got {self.timesteps}")
        if not SEED_RANGE[0] <= self.seed <= SEED_RANGE[1]:
            raise ValueError(f"seed must be in [0, 2**63), got {self.seed}")


@dataclass
class StepOutput:
    """One stream's result of one engine step.

    window: float32 [n <= window_patches, P, D]: left-context patches then the new patch (last).
    It is empty when the stream ended without a new patch (cancelled or failed).
    """

    request_id: str
    window: np.ndarray
    finished: bool
    error: str | None = None
    patch_index: int = field(default=-1)  # 0-based index of the new patch in the stream
