"""VOICE_ID -> encoded reference voice, so a voice's audio is encoded once and reused.

A voice is registered by a request that carries VOICE_ID together with its audio: a prompt to
continue (PROMPT_AUDIO with PROMPT_TEXT), a VoxCPM2 reference voice to imitate (REFERENCE_AUDIO, or
PROMPT_AUDIO alone), or both; later requests send VOICE_ID alone. The cache is bounded: past
`capacity` voices the least recently used one is dropped, and using it again asks for its audio.

Triton runs each text_encoder instance in its own process, so the voices live in a folder that all
instances of one server share: by default on tmpfs, named by the server's PID (`voices_folder`), or
one the text_encoder's `voice_folder` setting names, which several servers may share and which
outlives them. One file per voice, written whole and renamed into place, its modification time the
voice's last use: a voice registered through one instance (or server) is known to every other.

A voice's latents belong to the AudioVAE that encoded them, so a cache keeps voices under its
`latent_space` (`latent_space_key`): text_encoders of different checkpoints that share a folder
(VoxCPM2 beside VoxCPM1.5 in one server, say) each see only the voices registered through their own
AudioVAE, while a fine-tune that keeps the AudioVAE sees its base model's.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import torch

from voxcpm_triton.serving.shared_map import claim, release

MAX_VOICE_ID_LENGTH = 128


def voices_folder(server_pid: int) -> Path:
    return Path("/dev/shm") / f"voxcpm-voices-{server_pid}"


def latent_space_key(audio_vae: torch.nn.Module) -> str:
    """A digest of the AudioVAE encoder's weights: the same for every checkpoint whose voices are
    interchangeable, different for any other."""
    digest = hashlib.sha1()
    for name, tensor in sorted(audio_vae.encoder.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().to("cpu").contiguous().view(torch.uint8).numpy())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class CachedVoice:
    """Encoded audio, as Frontend.encode_prompt returns it, by the part it plays in the prompt."""

    prompt: torch.Tensor | None  # a continuation prompt's latents (left-padded)
    prompt_text: str | None  # its transcript
    reference: torch.Tensor | None  # a VoxCPM2 reference voice's latents (right-padded)

    def __post_init__(self) -> None:
        if (self.prompt is None) != (self.prompt_text is None):
            raise ValueError("a voice's prompt latents and prompt_text come together")
        if self.prompt is None and self.reference is None:
            raise ValueError("a voice needs prompt latents, reference latents or both")


class UnknownVoiceError(KeyError):
    def __str__(self) -> str:
        return self.args[0]


class VoiceCache:
    def __init__(self, folder: Path, capacity: int = 1024, owned: bool = False, latent_space: str = "") -> None:
        """owned: the folder is this server's own (voices_folder), so the last of its caches to
        close removes it with its voices; a folder named by a setting outlives the server.
        latent_space: latent_space_key of the AudioVAE whose voices this cache holds."""
        if capacity < 1:
            raise ValueError(f"voice cache capacity={capacity}; must be >= 1")
        self.capacity = capacity
        self.folder = folder
        self.latent_space = latent_space
        self._claim = claim(folder) if owned else None
        self.folder.mkdir(parents=True, exist_ok=True)

    def close(self) -> None:
        if self._claim is not None:
            release(self.folder, self._claim)
            self._claim = None

    @staticmethod
    def check_id(voice_id: str) -> str:
        if not voice_id or not voice_id.strip():
            raise ValueError("VOICE_ID is empty")
        # Format characters (zero-width joiners, direction marks) belong inside a name (emoji
        # sequences need them); an id of nothing else would look empty wherever it is shown.
        if all(c.isspace() or unicodedata.category(c) == "Cf" for c in voice_id):
            raise ValueError("VOICE_ID shows nothing: it holds only spaces and invisible format characters")
        if len(voice_id) > MAX_VOICE_ID_LENGTH:
            raise ValueError(f"VOICE_ID has {len(voice_id)} characters; allowed 1..{MAX_VOICE_ID_LENGTH}")
        # A NUL or an escape would make an id that logs and error messages cannot show as sent.
        control = next((c for c in voice_id if unicodedata.category(c) == "Cc"), None)
        if control is not None:
            raise ValueError(f"VOICE_ID holds the control character {control!r}; a voice's name is printable text")
        return voice_id

    def _path(self, voice_id: str) -> Path:
        return self.folder / f"{hashlib.sha1(f'{self.latent_space}/{voice_id}'.encode()).hexdigest()}.pt"

    def put(self, voice_id: str, voice: CachedVoice) -> None:
        """Register (or replace) a voice."""
        self.check_id(voice_id)
        path = self._path(voice_id)
        handle, name = tempfile.mkstemp(dir=self.folder, prefix=f".{path.name}.", suffix=".tmp")
        os.close(handle)
        temporary = Path(name)
        stored = {"voice_id": voice_id, "latent_space": self.latent_space, "prompt_text": voice.prompt_text}
        for part in ("prompt", "reference"):
            latents = getattr(voice, part)
            stored[part] = None if latents is None else latents.cpu()
        try:
            torch.save(stored, temporary)
            temporary.replace(path)  # atomic: other instances never read a half-written voice
        finally:
            temporary.unlink(missing_ok=True)  # a failed write (a full tmpfs) leaves nothing behind
        self._evict()

    def get(self, voice_id: str) -> CachedVoice:
        self.check_id(voice_id)
        path = self._path(voice_id)
        try:
            stored = torch.load(path, weights_only=True)
        except FileNotFoundError:
            stored = None
        except (EOFError, RuntimeError, pickle.UnpicklingError):  # damaged: gone, to be registered again
            path.unlink(missing_ok=True)
            raise UnknownVoiceError(f"VOICE_ID {voice_id!r} could not be read back; register it again by sending "
                                    "its audio with this VOICE_ID") from None
        if (not isinstance(stored, dict) or stored.get("voice_id") != voice_id
                or stored.get("latent_space", "") != self.latent_space):
            raise UnknownVoiceError(
                f"VOICE_ID {voice_id!r} is not registered; register it by sending PROMPT_AUDIO (with PROMPT_TEXT) "
                "or REFERENCE_AUDIO together with this VOICE_ID once"
            )
        try:
            os.utime(path)  # its last use, for the eviction order
        except FileNotFoundError:  # evicted by another instance since: this request still has it
            pass
        return CachedVoice(stored["prompt"], stored["prompt_text"], stored["reference"])

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
        # Counted after the stats: with files gone meanwhile the excess may be none, and a negative
        # slice end would drop every voice but the newest.
        excess = len(by_age) - self.capacity
        for _, path in sorted(by_age)[: max(0, excess)]:
            Path(path).unlink(missing_ok=True)

    def __len__(self) -> int:
        return len(self._voices())
