"""Prompt audio: validation messages, resampler accuracy and anti-aliasing, patch padding sides,
and latents equal to the reference's own prompt encoding (audio at the encoder rate)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from tests.reference_shim import import_reference
from voxcpm_triton.audio.prompt_audio import check_audio, encode_audio, pad_to_patches
from voxcpm_triton.audio.resample import output_length, resample
from voxcpm_triton.checkpoint.loader import load_checkpoint
from voxcpm_triton.checkpoint.make import make_checkpoint

TOLERANCE = 1e-4


def _tone(freq: float, rate: int, seconds: float) -> torch.Tensor:
    t = torch.arange(int(rate * seconds), dtype=torch.float64) / rate
    return (0.5 * torch.sin(2 * math.pi * freq * t)).float()


GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "resample.safetensors"


def test_prompts_are_resampled_as_the_reference_resamples_them() -> None:
    # tests/golden/make_resample_golden.py: torchaudio 2.11's resample for VoxCPM1.x, librosa 0.11's
    # (soxr HQ, fixed length) for VoxCPM2.
    golden = load_file(str(GOLDEN))
    cases = sorted({name.rpartition(".")[0] for name in golden})
    assert len(cases) == 11
    for case in cases:
        version, orig, new = (int(part) for part in case.split("_"))
        out = resample(golden[f"{case}.in"], orig, new, version)
        if version == 2:
            assert torch.equal(out, golden[f"{case}.out"]), case
        else:
            # torchaudio's resample is a float32 conv1d whose summation order follows the CPU's
            # kernels (AVX2 or AVX-512), so its own output moves by an ulp between machines: exact
            # where the golden was made, within 2 ulp of a full-scale sample elsewhere. A different
            # filter design misses by ~1e-3 or more.
            torch.testing.assert_close(out, golden[f"{case}.out"], rtol=0, atol=2.4e-7, msg=case)


def test_lengths_are_counted_as_each_reference_counts_them() -> None:
    # torchaudio rounds n * new / orig to float32 before its ceil (checked against torchaudio 2.11's
    # own function for 244 lengths); librosa takes the ceil of n * (new / orig) in float64.
    assert output_length(143323, 48000, 44100, 1) == 131678
    assert resample(torch.zeros(143323), 48000, 44100, 1).shape == (131678,)
    assert output_length(143323, 48000, 44100, 2) == 131678 + 1
    assert resample(torch.zeros(143323), 48000, 44100, 2).shape == (131679,)


@pytest.mark.parametrize("version", (1, 2))
@pytest.mark.parametrize("orig, new, freq", [(44100, 16000, 1000.0), (48000, 16000, 3000.0), (22050, 16000, 5000.0),
                                             (8000, 16000, 1000.0), (16000, 48000, 6000.0), (48000, 44100, 440.0)])
def test_resampled_tone_matches_analytic(orig: int, new: int, freq: float, version: int) -> None:
    out = resample(_tone(freq, orig, 1.0), orig, new, version)
    assert out.shape == (output_length(orig, orig, new, version),) and out.dtype == torch.float32
    expected = _tone(freq, new, out.shape[0] / new)[: out.shape[0]]
    interior = slice(new // 20, -new // 20)  # away from the zero-padded ends
    # torchaudio's short Hann filter (VoxCPM1.x) droops by up to ~2% near its cutoff: 6 kHz from 16 kHz
    # is 0.75 of the input's Nyquist rate.
    assert (out[interior] - expected[interior]).abs().max() < (2e-3 if version == 2 else 1e-2)


@pytest.mark.parametrize("orig, new", [(191996, 44100), (44101, 44100)])
def test_a_voxcpm1_filter_bank_in_blocks(orig: int, new: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # Odd rates make banks of ~new x orig taps (44101 -> 44100 Hz: 7.8 GB); they go in blocks.
    from voxcpm_triton.audio import resample as module

    audio = torch.randn(orig // 50, generator=torch.Generator().manual_seed(6))
    blocked = resample(audio, orig, new, 1)
    assert blocked.shape == (output_length(audio.shape[0], orig, new, 1),)
    if orig == 191996:  # small enough (a gcd of 28) to build whole as well
        monkeypatch.setattr(module, "MAX_BANK", 1 << 40)
        assert (blocked - resample(audio, orig, new, 1)).abs().max() < 1e-6
    tone = resample(_tone(440.0, orig, 1.0), orig, new, 1)
    expected = _tone(440.0, new, tone.shape[0] / new)[: tone.shape[0]]
    assert (tone[new // 20:-new // 20] - expected[new // 20:-new // 20]).abs().max() < 2e-3


@pytest.mark.parametrize("version", (1, 2))
def test_downsampling_removes_content_above_new_nyquist(version: int) -> None:
    out = resample(_tone(12000.0, 44100, 1.0), 44100, 16000, version)  # 12 kHz cannot exist at 16 kHz
    assert out[800:-800].abs().max() < 1e-3  # < -54 dB of the 0.5 input


def test_same_rate_is_untouched() -> None:
    audio = torch.randn(1234)
    assert torch.equal(resample(audio, 16000, 16000, 2), audio)


@pytest.mark.parametrize(
    "audio, rate, message",
    [
        (np.zeros(16000, np.float32), 4000, "outside the supported"),
        (np.zeros(16000, np.float32), 16000.5, "integer"),
        (np.zeros((2, 16000), np.float32), 16000, "mono"),
        (np.zeros(16000, np.int16), 16000, "float PCM"),
        (np.zeros(0, np.float32), 16000, "empty"),
        (np.array([0.0, np.nan] * 8000, np.float32), 16000, "non-finite"),
        (np.zeros(100, np.float32), 16000, "at least"),
        (np.zeros(16000 * 61, np.float32), 16000, "at most"),
        # one sample off a limit reads as off it, not as the limit itself
        (np.zeros(1599, np.float32), 16000, r"lasts 0.0999375 s \(1599 samples at 16000 Hz\); at least 0.1 s"),
        (np.zeros(16000 * 60 + 160, np.float32), 16000, r"lasts 60.01 s \(960160 samples at 16000 Hz\); at most 60"),
        (np.array(["x"] * 16000, dtype=object), 16000, "float PCM"),
        (np.zeros(16000, np.longdouble), 16000, "float PCM"),
        (None, 16000, "a numpy array or a torch tensor"),
        (["x"] * 16000, 16000, "a sequence of numbers"),
    ],
)
def test_bad_audio_is_refused_with_a_clear_message(audio, rate, message: str) -> None:
    with pytest.raises(ValueError, match=message) as error:
        check_audio(audio, rate, name="prompt_audio")
    assert "prompt_audio" in str(error.value)


def test_big_endian_reversed_and_listed_audio_are_read_as_they_are() -> None:
    wave = (0.1 * np.sin(np.arange(16000) * 0.1)).astype(np.float32)
    expected = torch.from_numpy(wave)
    assert torch.equal(check_audio(wave.astype(">f4"), 16000), expected)  # e.g. a big-endian WAV
    assert torch.equal(check_audio(wave[::-1].copy()[::-1], 16000), expected)  # a negative-stride view
    assert torch.equal(check_audio(wave.tolist(), 16000), expected)


def test_padding_sides() -> None:
    audio = torch.arange(1.0, 6.0)
    assert pad_to_patches(audio, 4, "left").tolist() == [0, 0, 0, 1, 2, 3, 4, 5]
    assert pad_to_patches(audio, 4, "right").tolist() == [1, 2, 3, 4, 5, 0, 0, 0]
    assert pad_to_patches(audio[:4], 4, "left").tolist() == [1, 2, 3, 4]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("prompt")
    return {v: make_checkpoint(root / v, v) for v in ("voxcpm2", "voxcpm1.5")}


def test_encode_shapes_and_resampled_input(checkpoints: dict[str, Path]) -> None:
    loaded = load_checkpoint(checkpoints["voxcpm2"])
    vae, patch = loaded.audio_vae, loaded.config.patch_size
    audio = 0.3 * torch.randn(int(0.5 * 48000), generator=torch.Generator().manual_seed(0))
    latents = encode_audio(vae, audio, 48000, patch, "left")
    samples = output_length(audio.shape[0], 48000, vae.encode_sample_rate, vae.spec.version)
    expected_patches = math.ceil(samples / (patch * vae.hop_length))
    assert latents.shape == (expected_patches, patch, vae.latent_dim)
    assert torch.isfinite(latents).all() and latents.abs().mean() > 1e-3


_REFERENCES: dict[str, torch.nn.Module] = {}  # one reference model per variant for this module


@pytest.mark.reference
@pytest.mark.parametrize("variant, padding", [("voxcpm2", "left"), ("voxcpm2", "right"), ("voxcpm1.5", "left")])
def test_latents_match_reference_encoding(checkpoints: dict[str, Path], tmp_path: Path, variant: str,
                                          padding: str) -> None:
    if import_reference() is None:
        pytest.skip("reference voxcpm package not installed")
    import soundfile
    from voxcpm.model import VoxCPM2Model, VoxCPMModel

    folder = checkpoints[variant]
    loaded = load_checkpoint(folder)
    rate = loaded.audio_vae.encode_sample_rate
    audio = (0.3 * torch.randn(int(0.77 * rate), generator=torch.Generator().manual_seed(1))).numpy()
    wav = tmp_path / "prompt.wav"
    soundfile.write(wav, audio, rate, subtype="FLOAT")

    if variant not in _REFERENCES:
        model_class = VoxCPM2Model if variant == "voxcpm2" else VoxCPMModel
        _REFERENCES[variant] = model_class.from_local(str(folder), optimize=False, device="cpu")
    reference = _REFERENCES[variant]
    if variant == "voxcpm2":
        expected = reference._encode_wav(str(wav), padding_mode=padding)
    else:
        expected = reference.build_prompt_cache(prompt_text="hi", prompt_wav_path=str(wav))["audio_feat"]
    ours = encode_audio(loaded.audio_vae, audio, rate, loaded.config.patch_size, padding)
    assert ours.shape == expected.shape
    assert (ours - expected).abs().max().item() <= TOLERANCE
