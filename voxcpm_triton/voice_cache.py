"""VOICE_ID -> encoded reference voice, so a voice's audio is encoded once and reused.

A voice is registered by a request that carries VOICE_ID together with PROMPT_AUDIO (with
PROMPT_TEXT: a prompt to continue; without: a VoxCPM2 reference voice); later requests send
VOICE_ID alone. The cache is bounded: past `capacity` voices the least recently used one is
dropped, and using it again asks for its audio.

Triton runs each text_encoder instance in its own process, so the voices live in a folder on tmpfs
that all instances of one server share (`voices_folder`): one file per voice, written whole and
renamed into place, its modification time the voice's last use. A voice registered through one
instance is then known to every other, whichever instance the next request lands on.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import torch

MAX_VOICE_ID_LENGTH = 128


def voices_folder(server_pid: int) -> Path:
    return Path("/dev/shm") / f"voxcpm-voices-{server_pid}"


@dataclass(frozen=True)
class CachedVoice:
    latents: torch.Tensor  # encoded audio, as Frontend.encode_prompt returns it
    prompt_text: str | None  # transcript of a continuation prompt; None: a reference voice


class UnknownVoiceError(KeyError):
    def __str__(self) -> str:
        return self.args[0]


class VoiceCache:
    def __init__(self, folder: Path, capacity: int = 1024) -> None:
        if capacity < 1:
            raise ValueError(f"voice cache capacity={capacity}; must be >= 1")
        self.capacity = capacity
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def check_id(voice_id: str) -> str:
        if not voice_id or not voice_id.strip():
            raise ValueError("VOICE_ID is empty")
        if len(voice_id) > MAX_VOICE_ID_LENGTH:
            raise ValueError(f"VOICE_ID has {len(voice_id)} characters; allowed 1..{MAX_VOICE_ID_LENGTH}")
        return voice_id

    def _path(self, voice_id: str) -> Path:
        return self.folder / f"{hashlib.sha1(voice_id.encode()).hexdigest()}.pt"

    def put(self, voice_id: str, voice: CachedVoice) -> None:
        """Register (or replace) a voice."""
        self.check_id(voice_id)
        path = self._path(voice_id)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        torch.save({"voice_id": voice_id, "latents": voice.latents.cpu(), "prompt_text": voice.prompt_text}, temporary)
        temporary.replace(path)  # atomic: other instances never read a half-written voice
        self._evict()

    def get(self, voice_id: str) -> CachedVoice:
        self.check_id(voice_id)
        path = self._path(voice_id)
        try:
            stored = torch.load(path, weights_only=True)
        except FileNotFoundError:
            stored = None
        if stored is None or stored["voice_id"] != voice_id:
            raise UnknownVoiceError(
                f"VOICE_ID {voice_id!r} is not registered; register it by sending PROMPT_AUDIO "
                "(and PROMPT_TEXT) together with this VOICE_ID once"
            )
        try:
            os.utime(path)  # its last use, for the eviction order
        except FileNotFoundError:  # evicted by another instance since: this request still has it
            pass
        return CachedVoice(stored["latents"], stored["prompt_text"])

    def _voices(self) -> list[os.DirEntry]:
        return [entry for entry in os.scandir(self.folder) if entry.name.endswith(".pt")]

    def _evict(self) -> None:
        """Drop the least recently used voices past capacity (any instance may do it)."""
        entries = self._voices()
        if len(entries) <= self.capacity:
            return
        by_age = []
        for entry in entries:
            try:
                by_age.append((entry.stat().st_mtime_ns, entry.path))
            except FileNotFoundError:  # evicted meanwhile by another instance
                pass
        for _, path in sorted(by_age)[: len(by_age) - self.capacity]:
            Path(path).unlink(missing_ok=True)

    def __len__(self) -> int:
        return len(self._voices())
