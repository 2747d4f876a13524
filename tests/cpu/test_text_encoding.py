"""voxcpm_triton.serving.text_encoding (what text_encoder runs): voice modes, the voice cache,
MAX_SECONDS and the input errors that only the combination of tensors can reveal.

The Frontend itself is checked against the reference's generate() in test_frontend.py (every mode,
the combined one too), so each mode here is checked against the Frontend."""

import numpy as np
import pytest

from voxcpm_triton.checkpoint.loader import load_checkpoint
from voxcpm_triton.checkpoint.make import make_checkpoint
from voxcpm_triton.frontend import Frontend
from voxcpm_triton.serving.inputs import InputError
from voxcpm_triton.serving.request_tensors import to_wire
from voxcpm_triton.serving.text_encoding import TextEncoding
from voxcpm_triton.text.spoken_form import NormalizerUnavailable
from voxcpm_triton.voice_cache import VoiceCache

RATE = 16000
AUDIO = (0.2 * np.sin(np.arange(RATE // 2) * 0.07)).astype(np.float32)
OTHER = (0.1 * np.sin(np.arange(RATE * 3 // 4) * 0.19)).astype(np.float32)  # a second voice


def _encoding(tmp_path_factory, variant):
    loaded = load_checkpoint(make_checkpoint(tmp_path_factory.mktemp(variant) / "tiny", variant, size="tiny"))
    vae = loaded.audio_vae
    voices = VoiceCache(tmp_path_factory.mktemp(f"{variant}-voices"), 8)
    return TextEncoding(Frontend(loaded), voices, loaded.config.patch_size * vae.decode_hop_length / vae.sample_rate)


@pytest.fixture(scope="module")
def v2(tmp_path_factory):
    return _encoding(tmp_path_factory, "voxcpm2")


def _get(**values):
    arrays = {}
    for name, value in values.items():
        if isinstance(value, str):
            arrays[name] = np.array([[value.encode()]], dtype=object)
        elif isinstance(value, np.ndarray):
            arrays[name] = value[None]
        else:
            arrays[name] = np.array([[value]])
    return arrays.get


def test_max_seconds_caps_the_patches(v2):
    free = v2.prepare(_get(TEXT="A sentence of some length to speak.", SEED=1))
    capped = v2.prepare(_get(TEXT="A sentence of some length to speak.", SEED=1, MAX_SECONDS=0.5))
    assert capped["MAX_LEN"][0, 0] == 4  # 0.5 s / 0.16 s per patch, rounded up
    assert free["MAX_LEN"][0, 0] > 4
    assert capped["NOISE_SEED"][0, 0] == 1 and capped["CFG"][0, 0] == 2.0 and capped["STEPS"][0, 0] == 10


def test_voice_id_reuses_the_registered_prompt_and_reference(v2):
    for voice_id, text in (("prompted", "Its transcript."), ("reference", None)):
        extra = {} if text is None else {"PROMPT_TEXT": text}
        fresh = v2.prepare(_get(TEXT="Hello.", SEED=3, VOICE_ID=voice_id, PROMPT_AUDIO=AUDIO, PROMPT_SAMPLE_RATE=RATE, **extra))
        reused = v2.prepare(_get(TEXT="Hello.", SEED=3, VOICE_ID=voice_id))
        for name in fresh:
            np.testing.assert_array_equal(reused[name], fresh[name], err_msg=f"{voice_id}: {name}")
    prompted = v2.prepare(_get(TEXT="Hello.", VOICE_ID="prompted"))
    referenced = v2.prepare(_get(TEXT="Hello.", VOICE_ID="reference"))
    assert prompted["CONTEXT_PATCHES"].shape[1] > 0, "a continuation prompt is the vocoder's left context"
    assert referenced["CONTEXT_PATCHES"].shape[1] == 0


def test_a_request_that_fails_registers_no_voice(v2):
    too_long = "word " * 600  # with the prompt, past the tiny checkpoint's 512 positions
    with pytest.raises(ValueError, match="leaves no room"):
        v2.prepare(_get(TEXT=too_long, VOICE_ID="late", PROMPT_AUDIO=AUDIO, PROMPT_SAMPLE_RATE=RATE))
    with pytest.raises(InputError, match="late"):
        v2.prepare(_get(TEXT="Hello.", VOICE_ID="late"))
    # Nor does it replace a voice registered under the same id.
    kept = v2.prepare(_get(TEXT="Hello.", SEED=3, VOICE_ID="kept", PROMPT_AUDIO=AUDIO, PROMPT_SAMPLE_RATE=RATE))
    with pytest.raises(ValueError, match="leaves no room"):
        v2.prepare(_get(TEXT=too_long, VOICE_ID="kept", PROMPT_AUDIO=OTHER, PROMPT_SAMPLE_RATE=RATE))
    _assert_same(v2.prepare(_get(TEXT="Hello.", SEED=3, VOICE_ID="kept")), kept, "kept")


def _assert_same(ours: dict, expected: dict, what: str) -> None:
    assert ours.keys() == expected.keys()
    for name in ours:
        np.testing.assert_array_equal(ours[name], expected[name], err_msg=f"{what}: {name}")


def test_each_voice_mode_is_the_frontends(v2):
    frontend = v2.frontend
    prompt = {"prompt_audio": AUDIO, "prompt_sample_rate": RATE, "prompt_text": "Its transcript."}
    reference = {"reference_audio": OTHER, "reference_sample_rate": RATE}
    cases = {
        "continuation": ({"PROMPT_AUDIO": AUDIO, "PROMPT_SAMPLE_RATE": RATE, "PROMPT_TEXT": "Its transcript."}, prompt),
        "reference": ({"REFERENCE_AUDIO": OTHER, "REFERENCE_SAMPLE_RATE": RATE}, reference),
        "reference sent as PROMPT_AUDIO": ({"PROMPT_AUDIO": OTHER, "PROMPT_SAMPLE_RATE": RATE}, reference),
        "combined": ({"PROMPT_AUDIO": AUDIO, "PROMPT_SAMPLE_RATE": RATE, "PROMPT_TEXT": "Its transcript.",
                      "REFERENCE_AUDIO": OTHER, "REFERENCE_SAMPLE_RATE": RATE}, {**prompt, **reference}),
    }
    for mode, (tensors, arguments) in cases.items():
        ours = v2.prepare(_get(TEXT="Hello there.", SEED=5, **tensors))
        expected = to_wire(frontend.prepare("Hello there.", seed=5, **arguments))
        _assert_same(ours, expected, mode)


def test_voice_id_keeps_both_parts_of_a_combined_voice(v2):
    tensors = {"PROMPT_AUDIO": AUDIO, "PROMPT_SAMPLE_RATE": RATE, "PROMPT_TEXT": "Its transcript.",
               "REFERENCE_AUDIO": OTHER, "REFERENCE_SAMPLE_RATE": RATE}
    fresh = v2.prepare(_get(TEXT="Hello.", SEED=3, VOICE_ID="both", **tensors))
    _assert_same(v2.prepare(_get(TEXT="Hello.", SEED=3, VOICE_ID="both")), fresh, "reused")
    prompt_only = v2.prepare(_get(TEXT="Hello.", SEED=3, **{k: v for k, v in tensors.items() if "REFERENCE" not in k}))
    assert fresh["TOKENS"].shape[1] > prompt_only["TOKENS"].shape[1], "the reference adds its own positions"


def test_normalize_puts_the_text_in_spoken_form(v2):
    pytest.importorskip("wetext")
    text = "I paid $3.50 for 2 apples."
    ours = v2.prepare(_get(TEXT=text, SEED=2, NORMALIZE=True))
    _assert_same(ours, to_wire(v2.frontend.prepare(text, seed=2, normalize=True)), "normalized")
    spelled = v2.frontend.spoken_form(text)
    assert "two apples" in spelled
    _assert_same(ours, to_wire(v2.frontend.prepare(spelled, seed=2)), "spelled out by hand")
    _assert_same(v2.prepare(_get(TEXT=text, SEED=2, NORMALIZE=False)), to_wire(v2.frontend.prepare(text, seed=2)),
                 "not normalized")


def test_normalize_errors_name_the_tensor(v2, monkeypatch):
    def unavailable(text):
        raise NormalizerUnavailable("text normalisation needs the packages wetext and inflect")

    monkeypatch.setattr(v2.frontend, "spoken_form", unavailable)
    with pytest.raises(InputError, match="NORMALIZE: text normalisation needs the packages wetext and inflect"):
        v2.prepare(_get(TEXT="3 apples", NORMALIZE=True))
    assert v2.prepare(_get(TEXT="3 apples"))["TOKENS"].size > 0, "without NORMALIZE the grammars are not needed"
    # A text the grammars leave nothing of (wetext does so with emoji alone) says NORMALIZE did it.
    monkeypatch.setattr(v2.frontend, "spoken_form", lambda text: "")
    with pytest.raises(ValueError, match="text once normalised produced no tokens"):
        v2.prepare(_get(TEXT="\U0001F600", NORMALIZE=True))


@pytest.mark.parametrize(
    "values, message",
    [
        ({"TEXT": "   "}, "TEXT is empty"),
        ({"TEXT": "Hi.", "PROMPT_TEXT": "words"}, "PROMPT_TEXT needs PROMPT_AUDIO"),
        ({"TEXT": "Hi.", "PROMPT_SAMPLE_RATE": RATE}, "PROMPT_SAMPLE_RATE was sent without PROMPT_AUDIO"),
        ({"TEXT": "Hi.", "PROMPT_AUDIO": AUDIO}, "PROMPT_SAMPLE_RATE is required with PROMPT_AUDIO"),
        ({"TEXT": "Hi.", "PROMPT_AUDIO": AUDIO, "PROMPT_SAMPLE_RATE": RATE, "PROMPT_TEXT": " "}, "PROMPT_TEXT is empty"),
        ({"TEXT": "Hi.", "PROMPT_AUDIO": AUDIO, "PROMPT_SAMPLE_RATE": RATE, "PROMPT_TEXT": "w" * 4001},
         r"PROMPT_TEXT has 4001 characters; allowed 1..4000"),
        ({"TEXT": "word " * 600}, r"prompt of \d+ positions \(text\) leaves no room .*; shorten the text$"),
        ({"TEXT": "Hi.", "PROMPT_AUDIO": AUDIO[:100], "PROMPT_SAMPLE_RATE": RATE},
         r"PROMPT_AUDIO lasts 0.00625 s \(100 samples at 16000 Hz\); at least 0.1 s"),
        ({"TEXT": "Hi.", "VOICE_ID": "x" * 200}, "allowed 1..128"),
        ({"TEXT": "Hi.", "REFERENCE_SAMPLE_RATE": RATE}, "REFERENCE_SAMPLE_RATE was sent without REFERENCE_AUDIO"),
        ({"TEXT": "Hi.", "REFERENCE_AUDIO": AUDIO}, "REFERENCE_SAMPLE_RATE is required with REFERENCE_AUDIO"),
        ({"TEXT": "Hi.", "REFERENCE_AUDIO": AUDIO[:100], "REFERENCE_SAMPLE_RATE": RATE},
         r"REFERENCE_AUDIO lasts 0.00625 s \(100 samples at 16000 Hz\)"),
        ({"TEXT": "Hi.", "PROMPT_AUDIO": AUDIO, "PROMPT_SAMPLE_RATE": RATE, "REFERENCE_AUDIO": OTHER,
          "REFERENCE_SAMPLE_RATE": RATE}, "PROMPT_AUDIO without PROMPT_TEXT is a reference voice, and so is REFERENCE_AUDIO"),
        ({"TEXT": "Hi.", "PROMPT_TEXT": "words", "REFERENCE_AUDIO": OTHER, "REFERENCE_SAMPLE_RATE": RATE},
         "PROMPT_TEXT needs PROMPT_AUDIO"),
    ],
)
def test_input_errors(v2, values, message):
    # ValueError: what the text_encoder model turns into an error response (InputError is one).
    with pytest.raises(ValueError, match=message):
        v2.prepare(_get(**values))


def test_reference_voice_needs_voxcpm2(tmp_path_factory):
    v15 = _encoding(tmp_path_factory, "voxcpm1.5")
    with pytest.raises(InputError, match="PROMPT_AUDIO without PROMPT_TEXT .* needs a VoxCPM2 checkpoint"):
        v15.prepare(_get(TEXT="Hi.", PROMPT_AUDIO=AUDIO, PROMPT_SAMPLE_RATE=RATE))
    with pytest.raises(InputError, match=r"REFERENCE_AUDIO \(a reference voice\) needs a VoxCPM2 checkpoint"):
        v15.prepare(_get(TEXT="Hi.", REFERENCE_AUDIO=AUDIO, REFERENCE_SAMPLE_RATE=RATE, PROMPT_AUDIO=OTHER,
                         PROMPT_SAMPLE_RATE=RATE, PROMPT_TEXT="Its text."))
    prompted = v15.prepare(_get(TEXT="Hi.", PROMPT_AUDIO=AUDIO, PROMPT_SAMPLE_RATE=RATE, PROMPT_TEXT="Its text."))
    assert prompted["TOKENS"].shape[1] > 0
