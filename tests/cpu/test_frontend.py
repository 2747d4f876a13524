"""Frontend.prepare builds the same prompt sequence as the reference's generate() path for every
prompt mode (zero-shot, continuation, VoxCPM2 reference and combined), with the reference's text
clean-up (and its optional normalisation) and max-length guard, and refuses bad input with clear
messages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.reference_shim import import_reference
from voxcpm_triton.checkpoint.loader import load_checkpoint
from voxcpm_triton.checkpoint.make import make_checkpoint
from voxcpm_triton.engine.request import GenerationRequest, runaway_guard_max_len
from voxcpm_triton.frontend import MAX_TEXT_CHARS, Frontend

TOLERANCE = 1e-4
TEXT = "Hello,\nthis  is the\tfirst test sentence. 你好世界"
PROMPT_TEXT = "the voice of a model "


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("frontend")
    return {v: make_checkpoint(root / v, v) for v in ("voxcpm2", "voxcpm1.5")}


@pytest.fixture(scope="module")
def frontends(folders: dict[str, Path]) -> dict[str, Frontend]:
    return {v: Frontend(load_checkpoint(path)) for v, path in folders.items()}


def _audio(frontend: Frontend, seconds: float, seed: int) -> np.ndarray:
    rate = frontend.audio_vae.encode_sample_rate
    return (0.3 * torch.randn(int(seconds * rate), generator=torch.Generator().manual_seed(seed))).numpy()


class _Captured(Exception):
    def __init__(self, args, kwargs):
        super().__init__("captured")
        self.args_, self.kwargs_ = args, kwargs


_REFERENCES: dict[str, torch.nn.Module] = {}


def _reference_inputs(folder: Path, variant: str, text: str, prompt_wav: str | None, prompt_text: str | None,
                      reference_wav: str | None, max_len: int, normalize: bool = False):
    """What the reference's VoxCPM.generate hands its inference loop."""
    import re

    from voxcpm.model import VoxCPM2Model, VoxCPMModel

    if variant not in _REFERENCES:
        model_class = VoxCPM2Model if variant == "voxcpm2" else VoxCPMModel
        _REFERENCES[variant] = model_class.from_local(str(folder), optimize=False, device="cpu")
    model = _REFERENCES[variant]
    # VoxCPM._generate's text handling and prompt cache, without its denoiser/download machinery.
    text = re.sub(r"\s+", " ", text.replace("\n", " "))
    cache = None
    if prompt_wav is not None or reference_wav is not None:
        if variant == "voxcpm2":
            cache = model.build_prompt_cache(prompt_text=prompt_text, prompt_wav_path=prompt_wav,
                                             reference_wav_path=reference_wav)
        else:
            cache = model.build_prompt_cache(prompt_text=prompt_text, prompt_wav_path=prompt_wav)
    if normalize:
        from voxcpm.utils.text_normalize import TextNormalizer

        text = TextNormalizer().normalize(text)

    def capture(*args, **kwargs):
        raise _Captured(args, kwargs)

    model._inference = capture
    try:
        next(model._generate_with_prompt_cache(target_text=text, prompt_cache=cache, max_len=max_len))
    except _Captured as captured:
        return captured.args_, captured.kwargs_
    raise AssertionError("reference did not reach its inference loop")


MODES = [("voxcpm2", "zero-shot"), ("voxcpm2", "continuation"), ("voxcpm2", "reference"),
         ("voxcpm2", "combined"), ("voxcpm1.5", "zero-shot"), ("voxcpm1.5", "continuation")]


@pytest.mark.reference
@pytest.mark.parametrize("variant, mode", MODES)
def test_prepare_matches_reference(folders, frontends, tmp_path: Path, variant: str, mode: str) -> None:
    if import_reference() is None:
        pytest.skip("reference voxcpm package not installed")
    import soundfile

    frontend = frontends[variant]
    rate = frontend.audio_vae.encode_sample_rate
    prompt = _audio(frontend, 0.61, seed=1) if mode in ("continuation", "combined") else None
    reference = _audio(frontend, 0.45, seed=2) if mode in ("reference", "combined") else None
    paths = {}
    for name, audio in (("prompt", prompt), ("reference", reference)):
        if audio is not None:
            paths[name] = str(tmp_path / f"{name}.wav")
            soundfile.write(paths[name], audio, rate, subtype="FLOAT")
    prompt_text = PROMPT_TEXT if prompt is not None else None

    request = frontend.prepare(TEXT, prompt_audio=prompt, prompt_sample_rate=rate, prompt_text=prompt_text,
                               reference_audio=reference, reference_sample_rate=rate, max_len=500, seed=7)
    args, kwargs = _reference_inputs(folders[variant], variant, TEXT, paths.get("prompt"), prompt_text,
                                     paths.get("reference"), max_len=500)
    tokens, text_mask, feats, audio_mask = (a[0] for a in args[:4])
    assert request.tokens.tolist() == tokens.tolist()
    assert request.text_mask.tolist() == text_mask.tolist()
    assert request.audio_mask.tolist() == audio_mask.tolist()
    assert request.feats.shape == feats.shape
    assert (request.feats - feats.float()).abs().max().item() <= TOLERANCE
    assert runaway_guard_max_len(request.target_text_tokens, request.max_len) == kwargs["max_len"]
    assert request.seed == 7 and request.min_len == kwargs["min_len"]


@pytest.mark.reference
@pytest.mark.parametrize("text", ["On 12/05/2026 we sold 3 apples for $4.50, 25% more.", "我有3个苹果，x-2=5。"])
def test_normalized_prepare_matches_reference(folders, frontends, tmp_path: Path, text: str) -> None:
    if import_reference() is None:
        pytest.skip("reference voxcpm package not installed")
    pytest.importorskip("wetext")
    frontend = frontends["voxcpm2"]
    rate = frontend.audio_vae.encode_sample_rate
    prompt = _audio(frontend, 0.61, seed=1)
    path = str(tmp_path / "prompt.wav")
    import soundfile

    soundfile.write(path, prompt, rate, subtype="FLOAT")
    request = frontend.prepare(text, prompt_audio=prompt, prompt_sample_rate=rate, prompt_text=PROMPT_TEXT,
                               max_len=500, normalize=True)
    args, kwargs = _reference_inputs(folders["voxcpm2"], "voxcpm2", text, path, PROMPT_TEXT, None, max_len=500,
                                     normalize=True)
    assert request.tokens.tolist() == args[0][0].tolist()
    assert runaway_guard_max_len(request.target_text_tokens, request.max_len) == kwargs["max_len"]
    plain = frontend.prepare(text, prompt_audio=prompt, prompt_sample_rate=rate, prompt_text=PROMPT_TEXT, max_len=500)
    assert plain.tokens.tolist() != request.tokens.tolist(), "the numbers must have been spelled out"


def test_prompt_latents_equal_prompt_audio(frontends) -> None:
    frontend = frontends["voxcpm2"]
    audio = _audio(frontend, 0.5, seed=3)
    latents = frontend.encode_prompt(audio, frontend.audio_vae.encode_sample_rate)
    from_audio = frontend.prepare("hello world", prompt_audio=audio,
                                  prompt_sample_rate=frontend.audio_vae.encode_sample_rate, prompt_text="hi ")
    from_latents = frontend.prepare("hello world", prompt_latents=latents, prompt_text="hi ")
    assert isinstance(from_latents, GenerationRequest)
    assert torch.equal(from_audio.tokens, from_latents.tokens)
    assert torch.equal(from_audio.feats, from_latents.feats)
    assert torch.equal(from_audio.context_patches, latents[-from_audio.context_patches.shape[0]:])


def test_resampled_prompt_is_accepted(frontends) -> None:
    frontend = frontends["voxcpm1.5"]  # encoder at 44.1 kHz: a 16 kHz prompt must be resampled
    audio = (0.3 * torch.randn(16000, generator=torch.Generator().manual_seed(4))).numpy()
    request = frontend.prepare("hello", prompt_audio=audio, prompt_sample_rate=16000, prompt_text="hi ")
    assert int(request.audio_mask.sum()) > 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(text="   \n "), "non-empty"),
        (dict(text="a" * (MAX_TEXT_CHARS + 1)), "at most"),
        (dict(text="hi", prompt_audio=np.zeros(16000, np.float32), prompt_sample_rate=16000), "prompt_text"),
        (dict(text="hi", prompt_text="only text"), "prompt_text"),
        (dict(text="hi", prompt_audio=np.zeros(16000, np.float32), prompt_text="x"), "sample rate"),
        (dict(text="hi", prompt_audio=np.zeros(16000, np.float32), prompt_sample_rate=1000, prompt_text="x"),
         "outside the supported"),
        (dict(text="hi", prompt_audio=np.full(16000, np.inf, np.float32), prompt_sample_rate=16000,
              prompt_text="x"), "non-finite"),
        (dict(text="hi", prompt_audio=np.zeros(16000, np.float32), prompt_sample_rate=16000,
              prompt_latents=torch.zeros(1, 4, 16), prompt_text="x"), "not both"),
        (dict(text="hi", prompt_latents=torch.zeros(2, 3, 16), prompt_text="x"), "prompt_latents"),
    ],
)
def test_bad_input_is_refused(frontends, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        frontends["voxcpm2"].prepare(**kwargs)


def test_reference_audio_needs_voxcpm2(frontends) -> None:
    with pytest.raises(ValueError, match="VoxCPM2"):
        frontends["voxcpm1.5"].prepare("hi", reference_audio=np.zeros(44100, np.float32), reference_sample_rate=44100)


def test_too_long_prompt_for_max_length_is_refused(frontends) -> None:
    frontend = frontends["voxcpm2"]
    latents = torch.zeros(frontend.config.max_length, frontend.config.patch_size, frontend.config.feat_dim)
    with pytest.raises(ValueError, match="max_length"):
        frontend.prepare("hi", prompt_latents=latents, prompt_text="x")
