"""voxcpm_triton.voice_cache: register, reuse, unknown id message, LRU bound."""

import pytest
import torch

from voxcpm_triton.voice_cache import CachedVoice, UnknownVoiceError, VoiceCache


def _voice(value: float) -> CachedVoice:
    return CachedVoice(torch.full((2, 4, 8), value), "prompt")


def test_registered_voice_is_returned():
    cache = VoiceCache()
    cache.put("alice", _voice(1.0))
    assert torch.equal(cache.get("alice").latents, torch.full((2, 4, 8), 1.0))


def test_unknown_voice_says_how_to_register():
    with pytest.raises(UnknownVoiceError, match="VOICE_ID 'bob' is not registered; register it by sending PROMPT_AUDIO"):
        VoiceCache().get("bob")


def test_least_recently_used_voice_is_dropped_past_capacity():
    cache = VoiceCache(capacity=2)
    cache.put("a", _voice(1.0))
    cache.put("b", _voice(2.0))
    cache.get("a")  # a is now more recent than b
    cache.put("c", _voice(3.0))
    assert len(cache) == 2
    cache.get("a")
    cache.get("c")
    with pytest.raises(UnknownVoiceError):
        cache.get("b")


@pytest.mark.parametrize("voice_id, message", [("", "VOICE_ID is empty"), ("x" * 129, "allowed 1..128")])
def test_bad_voice_ids(voice_id, message):
    with pytest.raises(ValueError, match=message):
        VoiceCache().put(voice_id, _voice(0.0))
