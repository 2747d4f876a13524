"""VoxCPM.from_pretrained / generate on tiny checkpoints in the official layout: streaming chunks,
and end-to-end audio parity with the reference `generate` (zero-shot and voice cloning)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import soundfile
import torch

from tests.reference_shim import import_reference
from voxcpm_triton.api import VoxCPM, _resolve_devices
from voxcpm_triton.checkpoint.make import make_checkpoint

torch.set_num_threads(1)  # tiny model: threads only add contention on the shared CI cores

AUDIO_TOLERANCE = 1e-4  # fp32 max abs error of the waveform
TEXT = "hello world"


@pytest.fixture(scope="module", params=["voxcpm2", "voxcpm1.5", "voxcpm0.5b"])
def checkpoint(request, tmp_path_factory):
    return make_checkpoint(tmp_path_factory.mktemp(request.param) / "ckpt", request.param, size="tiny", seed=3)


@pytest.fixture(scope="module")
def tts(checkpoint):
    model = VoxCPM.from_pretrained(checkpoint, devices=None, max_slots=4)
    yield model
    model.close()


def prompt_wav(folder, tts: VoxCPM, seconds: float = 0.5) -> str:
    """A short tone at the AudioVAE's encoder rate (no resampling on either side)."""
    config = tts._devices[0].checkpoint.config
    rate = config.encode_sample_rate
    t = np.arange(int(seconds * rate)) / rate
    path = str(folder / f"prompt_{rate}.wav")
    soundfile.write(path, (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), rate)
    return path


def test_chunks_grow_by_whole_patches_and_concatenate_to_full(tts):
    config = tts._devices[0].checkpoint.config
    chunks = list(tts.generate(TEXT, seed=1, max_len=9, min_len=9))
    # One patch first, then 2, then 4 (audio.chunks), the rest in the last chunk.
    assert [len(c) // config.samples_per_patch for c in chunks] == [1, 2, 4, 2]
    assert all(c.dtype == np.float32 and len(c) % config.samples_per_patch == 0 for c in chunks)
    np.testing.assert_array_equal(np.concatenate(chunks), tts.generate_full(TEXT, seed=1, max_len=9, min_len=9))
    assert tts.sample_rate == config.sample_rate


def test_concurrent_callers_get_what_they_get_alone(tts):
    alone = {seed: tts.generate_full(TEXT, seed=seed, max_len=8) for seed in (4, 5, 6)}
    together: dict[int, np.ndarray] = {}

    def run(seed):
        together[seed] = tts.generate_full(TEXT, seed=seed, max_len=8)

    threads = [threading.Thread(target=run, args=(seed,)) for seed in alone]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for seed, audio in alone.items():
        assert audio.shape == together[seed].shape
        assert np.abs(audio - together[seed]).max() <= 1e-5


def test_stopping_early_frees_the_slot(tts):
    stream = tts.generate(TEXT, seed=2, max_len=40, min_len=40)
    next(stream)
    stream.close()
    engine = tts._devices[0].engine
    for _ in range(200):
        if engine.live_slots == 0:
            break
        threading.Event().wait(0.01)
    assert engine.live_slots == 0


def test_bad_inputs_are_reported(tts, tmp_path):
    with pytest.raises(ValueError, match="text"):
        list(tts.generate("   "))
    with pytest.raises(ValueError, match="sample rate"):
        list(tts.generate(TEXT, prompt_wav=np.zeros(1000, np.float32), prompt_text="hi"))


@pytest.mark.parametrize("options, error, message", [
    ({"cfg_value": "2"}, TypeError, "cfg_value must be a number, got '2'"),
    ({"inference_timesteps": 2.5}, TypeError, "inference_timesteps must be an integer, got 2.5"),
    ({"seed": 1.5}, TypeError, "seed must be an integer"),
    ({"max_len": float("nan")}, TypeError, "max_len must be an integer"),
    ({"prompt_text": 5, "prompt_wav": np.zeros(8000, np.float32), "prompt_sample_rate": 16000}, TypeError,
     "prompt_text must be a str"),
    ({"cfg_value": -1.0}, ValueError, r"cfg_value must be in \[0, 10\], got -1.0"),
    ({"cfg_value": 10.5}, ValueError, r"cfg_value must be in \[0, 10\], got 10.5"),
    ({"inference_timesteps": 0}, ValueError, r"timesteps must be in \[1, 100\]"),
    ({"seed": -1}, ValueError, r"seed must be in \[0, 2\*\*63\)"),
    ({"max_len": 0}, ValueError, "max_len must be >= 1"),
    ({"prompt_wav": "/no/such.wav", "prompt_text": "hi"}, ValueError, "prompt_wav: cannot read '/no/such.wav'"),
    ({"prompt_wav": np.full(8000, 1e6, np.float32), "prompt_sample_rate": 16000, "prompt_text": "hi"}, ValueError,
     r"prompt_wav holds 8000 samples outside \[-1, 1\] \(peak 1e\+06\)"),
    ({"prompt_sample_rate": 16000}, ValueError, "prompt_sample_rate was given without prompt_wav"),
])
def test_bad_arguments_are_named_and_hold_no_slot(tts, options, error, message):
    with pytest.raises(error, match=message):
        next(tts.generate(TEXT, **options))
    assert tts._devices[0].loop.live_streams == 0


def test_numpy_integers_and_a_file_with_a_rate_given(tts, tmp_path):
    first = next(tts.generate(TEXT, seed=np.int64(3), inference_timesteps=np.int32(2)))
    assert first.size > 0
    with pytest.raises(ValueError, match="prompt_sample_rate is for an array"):
        next(tts.generate(TEXT, prompt_wav=prompt_wav(tmp_path, tts), prompt_text="hi", prompt_sample_rate=44100))
    with pytest.raises(ValueError, match="text is not valid Unicode"):
        next(tts.generate("ab\ud800cd"))


def _reference_model(checkpoint):
    import_reference()
    if '"voxcpm2"' in (checkpoint / "config.json").read_text():
        from voxcpm.model.voxcpm2 import VoxCPM2Model as Model
    else:
        from voxcpm.model.voxcpm import VoxCPMModel as Model
    return Model.from_local(str(checkpoint), optimize=False, device="cpu")


@pytest.mark.reference
@pytest.mark.skipif(import_reference() is None, reason="reference voxcpm not installed")
@pytest.mark.parametrize("mode", ["zero_shot", "continuation", "reference"])
def test_audio_matches_reference_generate(checkpoint, tts, tmp_path, mode):
    reference = _reference_model(checkpoint)
    is_v2 = hasattr(reference, "fusion_concat_proj")
    if mode == "reference" and not is_v2:
        pytest.skip("reference audio exists only in VoxCPM2")
    wav = prompt_wav(tmp_path, tts)
    ref_kwargs, our_kwargs = {}, {}
    if mode == "continuation":
        ref_kwargs = dict(prompt_text="hi ", prompt_wav_path=wav)
        our_kwargs = dict(prompt_text="hi ", prompt_wav=wav)
    elif mode == "reference":
        ref_kwargs = dict(reference_wav_path=wav)
        our_kwargs = dict(reference_wav=wav)
    torch.manual_seed(7)
    expected = reference.generate(target_text=TEXT, inference_timesteps=6, cfg_value=2.0, **ref_kwargs)
    expected = expected.squeeze(0).numpy()
    if mode == "continuation" and not is_v2:
        # VoxCPM1.x's offline generate also decodes its 2 trailing prompt patches; streaming (and we) do not.
        expected = expected[2 * tts._devices[0].checkpoint.config.samples_per_patch:]
    got = tts.generate_full(TEXT, seed=7, inference_timesteps=6, cfg_value=2.0, **our_kwargs)
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= AUDIO_TOLERANCE


@pytest.mark.parametrize("visible, devices, message", [
    (0, 0, r"devices=\[0\]: device 'cuda:0': this process sees no CUDA GPU"),
    (1, ["cpu", "cuda:3"], r"devices=\['cpu', 'cuda:3'\]: device 'cuda:3': this process sees 1 CUDA GPU"),
    (1, "no-such-device", r"devices=\['no-such-device'\]"),
])
def test_devices_this_process_cannot_use_are_refused_before_loading(monkeypatch, visible, devices, message):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: visible > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: visible)
    with pytest.raises(ValueError, match=message):
        _resolve_devices(devices)
