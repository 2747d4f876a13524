"""Text (+ optional prompt / reference voice) -> GenerationRequest: what text_encoder runs.

Mirrors the reference's high-level generate(): the target text gets the default clean-up, and with
normalize=True is put in spoken form (numbers, dates and symbols as words: text.spoken_form); the
prompt text is used as given and prepended to it, prompt audio is continued (left-padded latents),
VoxCPM2 reference audio is a voice to imitate (right-padded, isolated between ref markers). Audio
may come as a waveform or as latents already encoded (voice cache).
"""

from __future__ import annotations

import uuid

import numpy as np
import torch

from voxcpm_triton.audio.prompt_audio import Padding, encode_audio
from voxcpm_triton.checkpoint.loader import LoadedCheckpoint
from voxcpm_triton.engine.prefill import build_prefill
from voxcpm_triton.engine.request import CFG_VALUE_DEFAULT, TIMESTEPS_DEFAULT, GenerationRequest
from voxcpm_triton.text.normalize import clean_text
from voxcpm_triton.text.spoken_form import SpokenForm

MAX_TEXT_CHARS = 4000


class Frontend:
    def __init__(self, checkpoint: LoadedCheckpoint) -> None:
        self.config = checkpoint.config
        self.tokenizer = checkpoint.tokenizer
        self.audio_vae = checkpoint.audio_vae
        self.spoken_form = SpokenForm()

    def encode_prompt(self, audio: np.ndarray | torch.Tensor, sample_rate: int, padding: Padding = "left",
                      name: str = "prompt_audio") -> torch.Tensor:
        """Waveform -> latent patches [N, P, D]; padding 'left' for prompts, 'right' for references."""
        return encode_audio(self.audio_vae, audio, sample_rate, self.config.patch_size, padding, name)

    def _voice(self, audio, sample_rate, latents, padding: Padding, name: str) -> torch.Tensor | None:
        if audio is not None and latents is not None:
            raise ValueError(f"give either {name} or {name.replace('audio', 'latents')}, not both")
        if audio is not None:
            if sample_rate is None:
                raise ValueError(f"{name} needs its sample rate")
            return self.encode_prompt(audio, sample_rate, padding, name)
        return None if latents is None else torch.as_tensor(latents, dtype=torch.float32)

    def prepare(self, text: str, prompt_audio: np.ndarray | torch.Tensor | None = None,
                prompt_sample_rate: int | None = None, prompt_text: str | None = None,
                prompt_latents: torch.Tensor | None = None,
                reference_audio: np.ndarray | torch.Tensor | None = None,
                reference_sample_rate: int | None = None, reference_latents: torch.Tensor | None = None,
                request_id: str | None = None, min_len: int = 2, max_len: int | None = None,
                cfg_value: float = CFG_VALUE_DEFAULT, timesteps: int = TIMESTEPS_DEFAULT, seed: int = 0,
                normalize: bool = False) -> GenerationRequest:
        if not isinstance(text, str) or not text.strip():
            raise ValueError("text must be a non-empty string")
        for name, value in (("text", text), ("prompt_text", prompt_text)):
            if isinstance(value, str) and not value.isascii():
                try:
                    value.encode("utf-8")
                except UnicodeEncodeError as exc:  # a lone surrogate, which no tokenizer takes
                    raise ValueError(f"{name} is not valid Unicode ({exc.reason} at {exc.start})") from None
        if len(text) > MAX_TEXT_CHARS:
            raise ValueError(f"text has {len(text)} characters; at most {MAX_TEXT_CHARS} are accepted")
        prompt = self._voice(prompt_audio, prompt_sample_rate, prompt_latents, "left", "prompt_audio")
        reference = self._voice(reference_audio, reference_sample_rate, reference_latents, "right",
                                "reference_audio")
        if (prompt is None) != (prompt_text is None):
            raise ValueError("prompt audio (or prompt latents) and prompt_text must be given together")
        if reference is not None and not self.config.is_v2:
            raise ValueError(f"reference audio needs a VoxCPM2 checkpoint, this one is {self.config.variant}; "
                             "pass the voice as prompt audio with its prompt_text instead")

        target = clean_text(text)
        if normalize:
            target = self.spoken_form(target)
        spoken = (prompt_text or "") + target if prompt is not None else target
        tokens = self.tokenizer.encode(spoken)
        if not tokens:
            raise ValueError(f"text{' once normalised' if normalize else ''} produced no tokens")
        sequence = build_prefill(tokens, reference, prompt, self.config)
        if sequence.tokens.shape[0] >= self.config.max_length:
            voiced = prompt is not None or reference is not None
            raise ValueError(
                f"prompt of {sequence.tokens.shape[0]} positions ({'text + voice' if voiced else 'text'}) leaves no "
                f"room in the model's max_length {self.config.max_length}; shorten the text"
                + (" or the prompt audio" if voiced else "")
            )
        return GenerationRequest(
            request_id=request_id or uuid.uuid4().hex,
            tokens=sequence.tokens,
            feats=sequence.feats,
            text_mask=sequence.text_mask,
            audio_mask=sequence.audio_mask,
            context_patches=sequence.context_patches,
            min_len=min_len,
            max_len=max_len,
            cfg_value=cfg_value,
            timesteps=timesteps,
            seed=seed,
            target_text_tokens=len(self.tokenizer.encode(target)) if prompt is not None else len(tokens),
        )
