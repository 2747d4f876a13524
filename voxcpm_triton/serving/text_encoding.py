"""What the text_encoder model does for one request: read and check its tensors, resolve the voice
(fresh PROMPT_AUDIO and/or REFERENCE_AUDIO, a registered VOICE_ID, or none), run the Frontend and
flatten the resulting GenerationRequest into the tensors ar_decoder takes."""

from __future__ import annotations

from typing import Callable

import numpy as np

from voxcpm_triton.frontend import MAX_TEXT_CHARS, Frontend
from voxcpm_triton.serving import inputs
from voxcpm_triton.serving.inputs import InputError
from voxcpm_triton.serving.parameters import read_sampling_parameters
from voxcpm_triton.serving.request_tensors import to_wire
from voxcpm_triton.text.spoken_form import NormalizationFailed, NormalizerUnavailable
from voxcpm_triton.voice_cache import CachedVoice, UnknownVoiceError, VoiceCache

Getter = Callable[[str], "np.ndarray | None"]


class TextEncoding:
    """`seconds_per_patch` converts MAX_SECONDS."""

    def __init__(self, frontend: Frontend, voices: VoiceCache, seconds_per_patch: float) -> None:
        self.frontend = frontend
        self.voices = voices
        self.seconds_per_patch = seconds_per_patch

    @staticmethod
    def _audio(get: Getter, prefix: str) -> tuple[np.ndarray, int, str] | None:
        """(waveform, its rate, its tensor's name) from <prefix>_AUDIO and <prefix>_SAMPLE_RATE."""
        name, rate_name = f"{prefix}_AUDIO", f"{prefix}_SAMPLE_RATE"
        audio = inputs.audio(name, get(name))
        sample_rate = inputs.scalar(rate_name, get(rate_name), int, None)
        if audio is None:
            if sample_rate is not None:
                raise InputError(f"{rate_name} was sent without {name}")
            return None
        if sample_rate is None:
            raise InputError(f"{rate_name} is required with {name} (the audio's rate in Hz)")
        return audio, sample_rate, name

    def _voice(self, get: Getter) -> tuple[CachedVoice | None, str | None]:
        """The voice for this request and the VOICE_ID to register it under once the request is
        ready (None: nothing to register): freshly encoded (registered when VOICE_ID comes with it),
        looked up by VOICE_ID, or None (the model's own voice).

        As in the reference's generate(), a voice is a prompt the speech continues (PROMPT_AUDIO
        with PROMPT_TEXT), a VoxCPM2 reference voice to imitate (REFERENCE_AUDIO), or both.
        PROMPT_AUDIO without PROMPT_TEXT is a reference voice too. A registered voice keeps every
        part it was sent with."""
        voice_id = inputs.text("VOICE_ID", get("VOICE_ID"), required=False)
        prompt = self._audio(get, "PROMPT")
        reference = self._audio(get, "REFERENCE")
        prompt_text = inputs.text("PROMPT_TEXT", get("PROMPT_TEXT"), required=False)
        if prompt_text is not None and len(prompt_text) > MAX_TEXT_CHARS:
            raise InputError(f"PROMPT_TEXT has {len(prompt_text)} characters; allowed 1..{MAX_TEXT_CHARS}")
        if prompt_text is not None and prompt is None:
            raise InputError(
                "PROMPT_TEXT needs PROMPT_AUDIO (a registered VOICE_ID keeps the text it was registered with)"
            )
        if prompt is None and reference is None:
            if voice_id is None:
                return None, None
            try:
                return self.voices.get(voice_id), None
            except (UnknownVoiceError, ValueError) as exc:
                raise InputError(str(exc)) from None
        if prompt is not None and prompt_text is None:
            if reference is not None:
                raise InputError(
                    "PROMPT_AUDIO without PROMPT_TEXT is a reference voice, and so is REFERENCE_AUDIO: send "
                    "PROMPT_TEXT to continue PROMPT_AUDIO, or leave one of the two out"
                )
            prompt, reference = None, prompt
        if reference is not None and not self.frontend.config.is_v2:
            what = "REFERENCE_AUDIO" if reference[2] == "REFERENCE_AUDIO" else "PROMPT_AUDIO without PROMPT_TEXT"
            raise InputError(
                f"{what} (a reference voice) needs a VoxCPM2 checkpoint; this one is {self.frontend.config.variant}: "
                "send the voice as PROMPT_AUDIO with its transcript as PROMPT_TEXT"
            )
        if prompt_text is not None and not prompt_text.strip():
            raise InputError("PROMPT_TEXT is empty; leave it out to use PROMPT_AUDIO as a reference voice")
        if voice_id is not None:
            try:
                VoiceCache.check_id(voice_id)
            except ValueError as exc:
                raise InputError(str(exc)) from None
        voice = CachedVoice(
            prompt=None if prompt is None else self.frontend.encode_prompt(*prompt[:2], "left", prompt[2]),
            prompt_text=prompt_text,
            reference=None if reference is None else self.frontend.encode_prompt(*reference[:2], "right", reference[2]),
        )
        return voice, voice_id

    def prepare(self, get: Getter) -> dict[str, np.ndarray]:
        """The ar_decoder tensors for one request; InputError/ValueError carry the client's message."""
        text = inputs.text("TEXT", get("TEXT"))
        if not text.strip():
            raise InputError("TEXT is empty; send the text to speak")
        if len(text) > MAX_TEXT_CHARS:
            raise InputError(f"TEXT has {len(text)} characters; allowed 1..{MAX_TEXT_CHARS}")
        parameters = read_sampling_parameters(get)
        normalize = inputs.scalar("NORMALIZE", get("NORMALIZE"), bool, False)
        voice, register_as = self._voice(get)
        settings = dict(max_len=parameters.max_patches(self.seconds_per_patch), cfg_value=parameters.cfg_value,
                        timesteps=parameters.timesteps, seed=parameters.seed, normalize=normalize)
        try:
            if voice is None:
                request = self.frontend.prepare(text, **settings)
            else:
                request = self.frontend.prepare(text, prompt_text=voice.prompt_text, prompt_latents=voice.prompt,
                                                reference_latents=voice.reference, **settings)
        except (NormalizerUnavailable, NormalizationFailed) as exc:
            raise InputError(f"NORMALIZE: {exc}") from None
        wire = to_wire(request)
        if register_as is not None:  # only a request that is ready registers its voice
            self.voices.put(register_as, voice)
        return wire
