"""VOICE_ID -> encoded reference voice, so a voice's audio is encoded once and reused.

A voice is registered by a request that carries VOICE_ID together with PROMPT_AUDIO (with
PROMPT_TEXT: a prompt to continue; without: a VoxCPM2 reference voice); later requests send
VOICE_ID alone. The cache is bounded: past
`capacity` voices the least recently used one is dropped, and using it again asks for its audio."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import torch

MAX_VOICE_ID_LENGTH = 128


@dataclass(frozen=True)
class CachedVoice:
    latents: torch.Tensor  # encoded audio, as Frontend.encode_prompt returns it
    prompt_text: str | None  # transcript of a continuation prompt; None: a reference voice


class UnknownVoiceError(KeyError):
    def __str__(self) -> str:
        return self.args[0]


class VoiceCache:
    def __init__(self, capacity: int = 1024) -> None:
        if capacity < 1:
            raise ValueError(f"voice cache capacity={capacity}; must be >= 1")
        self.capacity = capacity
        self._voices: OrderedDict[str, CachedVoice] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def check_id(voice_id: str) -> str:
        if not voice_id or not voice_id.strip():
            raise ValueError("VOICE_ID is empty")
        if len(voice_id) > MAX_VOICE_ID_LENGTH:
            raise ValueError(f"VOICE_ID has {len(voice_id)} characters; allowed 1..{MAX_VOICE_ID_LENGTH}")
        return voice_id

    def put(self, voice_id: str, voice: CachedVoice) -> None:
        """Register (or replace) a voice."""
        self.check_id(voice_id)
        with self._lock:
            self._voices[voice_id] = voice
            self._voices.move_to_end(voice_id)
            while len(self._voices) > self.capacity:
                self._voices.popitem(last=False)

    def get(self, voice_id: str) -> CachedVoice:
        self.check_id(voice_id)
        with self._lock:
            voice = self._voices.get(voice_id)
            if voice is None:
                raise UnknownVoiceError(
                    f"VOICE_ID {voice_id!r} is not registered; register it by sending PROMPT_AUDIO "
                    "(and PROMPT_TEXT) together with this VOICE_ID once"
                )
            self._voices.move_to_end(voice_id)
            return voice

    def __len__(self) -> int:
        with self._lock:
            return len(self._voices)
