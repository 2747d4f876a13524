"""voxcpm_triton.voice_cache: register, reuse, unknown id message, LRU bound, and one store shared
by several caches (the text_encoder instances of one server)."""

import multiprocessing
import os
from pathlib import Path

import pytest
import torch

from voxcpm_triton.voice_cache import CachedVoice, UnknownVoiceError, VoiceCache


def _voice(value: float, prompt_text: str | None = "prompt") -> CachedVoice:
    """A continuation prompt, or with prompt_text=None a reference voice, filled with `value`."""
    latents = torch.full((2, 4, 8), value)
    if prompt_text is None:
        return CachedVoice(None, None, latents)
    return CachedVoice(latents, prompt_text, None)


def test_registered_voice_is_returned_with_each_part(tmp_path):
    cache = VoiceCache(tmp_path)
    cache.put("alice", _voice(1.0))
    voice = cache.get("alice")
    assert torch.equal(voice.prompt, torch.full((2, 4, 8), 1.0)) and voice.prompt_text == "prompt"
    assert voice.reference is None
    cache.put("carol", _voice(2.0, prompt_text=None))
    carol = cache.get("carol")
    assert carol.prompt is None and carol.prompt_text is None and torch.equal(carol.reference, torch.full((2, 4, 8), 2.0))
    cache.put("dave", CachedVoice(torch.ones(3, 4, 8), "both", torch.zeros(2, 4, 8)))
    dave = cache.get("dave")
    assert dave.prompt.shape == (3, 4, 8) and dave.prompt_text == "both" and dave.reference.shape == (2, 4, 8)


@pytest.mark.parametrize("prompt, prompt_text, reference", [
    (None, None, None), (torch.ones(1, 4, 8), None, None), (None, "text", torch.ones(1, 4, 8)),
])
def test_a_voice_needs_audio_and_a_prompt_needs_its_text(prompt, prompt_text, reference):
    with pytest.raises(ValueError, match="a voice"):
        CachedVoice(prompt, prompt_text, reference)


def test_unknown_voice_says_how_to_register(tmp_path):
    with pytest.raises(UnknownVoiceError, match="VOICE_ID 'bob' is not registered; register it by sending PROMPT_AUDIO"):
        VoiceCache(tmp_path).get("bob")


def _age(cache: VoiceCache, voice_id: str, seconds_ago: float) -> None:
    """Backdate a voice's last use (file times are too close together to order otherwise)."""
    when = 1_000_000_000 - seconds_ago
    os.utime(cache._path(voice_id), (when, when))


def test_least_recently_used_voice_is_dropped_past_capacity(tmp_path):
    cache = VoiceCache(tmp_path, capacity=2)
    cache.put("a", _voice(1.0))
    _age(cache, "a", 30)
    cache.put("b", _voice(2.0))
    _age(cache, "b", 20)
    cache.get("a")  # a is now more recent than b
    cache.put("c", _voice(3.0))
    assert len(cache) == 2
    cache.get("a")
    cache.get("c")
    with pytest.raises(UnknownVoiceError):
        cache.get("b")


def test_instances_share_their_voices_and_one_bound(tmp_path):
    first, second = VoiceCache(tmp_path, capacity=2), VoiceCache(tmp_path, capacity=2)
    first.put("a", _voice(1.0))
    assert torch.equal(second.get("a").prompt, torch.full((2, 4, 8), 1.0))
    second.put("a", _voice(5.0, prompt_text=None))  # re-registered through the other instance
    assert first.get("a").prompt is None and float(first.get("a").reference[0, 0, 0]) == 5.0
    _age(first, "a", 10)
    second.put("b", _voice(2.0))
    first.put("c", _voice(3.0))
    assert len(first) == len(second) == 2
    with pytest.raises(UnknownVoiceError):
        second.get("a")
    assert not list(tmp_path.glob("*.tmp"))


def test_voices_evicted_by_another_instance_meanwhile_are_not_evicted_twice(tmp_path, monkeypatch):
    cache = VoiceCache(tmp_path, capacity=10)
    for i in range(10):
        cache.put(f"v{i}", _voice(float(i)))
        _age(cache, f"v{i}", 100 - i)
    listed = cache._voices

    def listed_then_two_evicted_elsewhere() -> list[os.DirEntry]:
        entries = listed()
        for voice_id in ("v0", "v1"):  # the other instance's eviction, between the listing and the stats
            cache._path(voice_id).unlink()
        return entries

    monkeypatch.setattr(cache, "_voices", listed_then_two_evicted_elsewhere)
    cache.put("v10", _voice(10.0))
    monkeypatch.setattr(cache, "_voices", listed)
    assert len(cache) == 9
    for i in range(2, 11):
        cache.get(f"v{i}")


@pytest.mark.parametrize("voice_id, message", [
    ("", "VOICE_ID is empty"), ("x" * 129, "allowed 1..128"),
    ("a\x00b", r"VOICE_ID holds the control character '\\x00'"), ("a\x1b[31mb", "control character"),
    ("\u200b\u200d", "shows nothing"), (" \u2060 ", "shows nothing"),
])
def test_bad_voice_ids(tmp_path, voice_id, message):
    with pytest.raises(ValueError, match=message):
        VoiceCache(tmp_path).put(voice_id, _voice(0.0))


def test_voice_id_with_format_characters_inside_a_name(tmp_path):
    cache = VoiceCache(tmp_path)
    family = "\U0001F469\u200d\U0001F467"  # an emoji sequence joined by a zero-width joiner
    cache.put(family, _voice(0.0))
    assert cache.get(family) is not None


def _churn(folder: str, worker: int, rounds: int) -> int:
    """Register and read voices under a small bound while another process does the same; returns
    how many reads found a voice (the others were evicted meanwhile, which is allowed)."""
    cache = VoiceCache(Path(folder), capacity=3)
    found = 0
    for step in range(rounds):
        cache.put(f"w{worker}-{step % 5}", _voice(float(worker * 1000 + step)))
        for other in range(2):
            try:
                voice = cache.get(f"w{other}-{step % 5}")
            except UnknownVoiceError:
                continue
            assert voice.prompt.shape == (2, 4, 8) and float(voice.prompt[0, 0, 0]) // 1000 == other
            found += 1
    return found


def test_two_processes_register_and_read_at_once(tmp_path):
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        found = pool.starmap(_churn, [(str(tmp_path), worker, 200) for worker in range(2)])
    assert min(found) > 0
    # Two evictions racing may each drop a different voice: the bound holds, the count may dip below it.
    assert 1 <= len(VoiceCache(tmp_path, capacity=3)) <= 3 and not list(tmp_path.glob("*.tmp"))


def test_the_text_encoder_setting_names_the_folder(tmp_path, monkeypatch):
    from voxcpm_triton.serving.model_settings import VOICE_FOLDER_ENV, voice_folder
    from voxcpm_triton.voice_cache import voices_folder

    model_folder = str(tmp_path / "model_repository" / "text_encoder")
    monkeypatch.delenv(VOICE_FOLDER_ENV, raising=False)
    assert voice_folder({"voice_folder": ""}, model_folder, 4242) == voices_folder(4242)
    assert voice_folder({"voice_folder": "voices"}, model_folder, 4242) == (tmp_path / "model_repository" / "voices").resolve()
    monkeypatch.setenv(VOICE_FOLDER_ENV, str(tmp_path / "elsewhere"))
    assert voice_folder({"voice_folder": "voices"}, model_folder, 4242) == (tmp_path / "elsewhere").resolve()


def test_voices_of_another_audio_vae_are_not_seen(tmp_path):
    # Two checkpoints' text_encoders sharing one folder (VoxCPM2 beside VoxCPM1.5 in one server).
    v2, v15 = VoiceCache(tmp_path, latent_space="aaaa"), VoiceCache(tmp_path, latent_space="bbbb")
    v2.put("alice", _voice(1.0))
    with pytest.raises(UnknownVoiceError, match="'alice' is not registered"):
        v15.get("alice")
    v15.put("alice", _voice(2.0))  # each keeps its own
    assert torch.equal(v2.get("alice").prompt, torch.full((2, 4, 8), 1.0))
    assert torch.equal(v15.get("alice").prompt, torch.full((2, 4, 8), 2.0))


def test_the_latent_space_follows_the_audio_vae_encoder(tmp_path):
    from voxcpm_triton.checkpoint.loader import load_checkpoint
    from voxcpm_triton.checkpoint.make import make_checkpoint
    from voxcpm_triton.voice_cache import latent_space_key

    keys = {}
    for variant, seed in (("voxcpm2", 0), ("voxcpm2", 0), ("voxcpm2", 1), ("voxcpm1.5", 0)):
        folder = make_checkpoint(tmp_path / f"{variant}-{seed}-{len(keys)}", variant, size="tiny", seed=seed)
        keys.setdefault((variant, seed), set()).add(latent_space_key(load_checkpoint(folder, with_model=False).audio_vae))
    assert all(len(found) == 1 for found in keys.values())  # the same weights, the same key
    assert len({next(iter(found)) for found in keys.values()}) == 3


def test_a_damaged_voice_file_reads_as_unregistered_and_a_failed_write_leaves_nothing(tmp_path, monkeypatch):
    cache = VoiceCache(tmp_path)
    cache.put("alice", _voice(1.0))
    [stored] = tmp_path.glob("*.pt")
    stored.write_bytes(stored.read_bytes()[:20])
    with pytest.raises(UnknownVoiceError, match="'alice' could not be read back; register it again"):
        cache.get("alice")
    assert not stored.exists()

    def full_tmpfs(obj, path):
        Path(path).write_bytes(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", full_tmpfs)
    with pytest.raises(OSError, match="No space"):
        cache.put("bob", _voice(2.0))
    assert list(tmp_path.iterdir()) == []
