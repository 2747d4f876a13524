"""The client without a server: the ensemble tensors build_inputs makes, the RTF figures, and how the
CLI reads its text and voices."""

import io
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from client.__main__ import _read_text, _read_wav, main, parse_args  # noqa: E402
from client.streaming import StreamStats, VoxCPMClient, build_inputs  # noqa: E402


def test_only_given_options_become_tensors():
    tensors = {t.name(): t for t in build_inputs("Hi.", seed=3, max_seconds=1.5)}
    assert sorted(tensors) == ["MAX_SECONDS", "SEED", "TEXT"]
    assert tensors["TEXT"].datatype() == "BYTES" and tensors["TEXT"].shape() == [1]
    assert tensors["SEED"].datatype() == "INT64" and tensors["MAX_SECONDS"].datatype() == "FP32"


def test_voice_tensors_have_the_ensemble_dtypes():
    audio = np.zeros((1, 800), np.float64)  # one channel in any float layout: one FP32 vector
    tensors = {t.name(): t for t in build_inputs(
        "Hi.", prompt_audio=audio, prompt_sample_rate=16000, prompt_text="Text.", voice_id="v",
        reference_audio=audio[0], reference_sample_rate=24000, cfg_value=1.0, timesteps=5)}
    assert tensors["PROMPT_AUDIO"].datatype() == "FP32" and tensors["PROMPT_AUDIO"].shape() == [800]
    assert tensors["REFERENCE_AUDIO"].datatype() == "FP32" and tensors["REFERENCE_AUDIO"].shape() == [800]
    assert tensors["PROMPT_SAMPLE_RATE"].datatype() == tensors["REFERENCE_SAMPLE_RATE"].datatype() == "INT32"
    assert tensors["PROMPT_TEXT"].datatype() == tensors["VOICE_ID"].datatype() == "BYTES"
    assert tensors["CFG_VALUE"].datatype() == "FP32" and tensors["TIMESTEPS"].datatype() == "INT32"


@pytest.mark.parametrize("options, error, message", [
    ({"text": None}, TypeError, "text must be a str, got NoneType"),
    ({"voice_id": 3}, TypeError, "voice_id must be a str, got int"),
    ({"timesteps": 2.9}, TypeError, "timesteps must be an integer, got 2.9"),
    ({"timesteps": 2**32 + 10}, ValueError, "timesteps=4294967306 does not fit the server's int32 tensor"),
    ({"seed": 2**70}, ValueError, "seed=1180591620717411303424 does not fit the server's int64 tensor"),
    ({"cfg_value": "2"}, TypeError, "cfg_value must be a number, got '2'"),
    ({"reference_audio": np.zeros((800, 2)), "reference_sample_rate": 16000}, ValueError,
     r"reference_audio has shape \(800, 2\): send mono samples"),
])
def test_values_the_tensors_cannot_carry_are_refused(options, error, message):
    options = {"text": "Hi.", **options}
    with pytest.raises(error, match=message):
        build_inputs(**options)


def test_client_settings_are_checked():
    with pytest.raises(TypeError, match="url must be a 'host:port' string"):
        VoxCPMClient(None)
    with pytest.raises(ValueError, match="timeout_s must be a number of seconds > 0, got 0"):
        VoxCPMClient("127.0.0.1:1", timeout_s=0)


def test_rtf_excludes_the_first_chunk_wait():
    stats = StreamStats(first_chunk_s=0.5, wall_s=2.5, samples=96000, sample_rate=48000)
    assert stats.audio_s == 2.0
    assert stats.rtf == 1.0 and stats.wall_rtf == 1.25
    assert StreamStats().rtf is None


def test_a_stereo_recording_is_mixed_down_as_voxcpm_does(tmp_path):
    import soundfile

    left, right = np.full(480, 0.5, np.float32), np.full(480, -0.25, np.float32)
    soundfile.write(tmp_path / "stereo.wav", np.stack((left, right), axis=1), 16000, subtype="FLOAT")
    audio, rate = _read_wav(str(tmp_path / "stereo.wav"))
    assert rate == 16000 and audio.shape == (480,)
    np.testing.assert_allclose(audio, 0.125)
    assert _read_wav(None) == (None, None)


def test_the_text_comes_from_the_command_line_or_stdin(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.StringIO("  Read from a pipe.\n"))
    assert _read_text("-") == "Read from a pipe."
    assert _read_text("Typed.") == "Typed."
    assert parse_args(["--register-only", "--voice-id", "v", "--prompt-wav", "p.wav"]).text is None
    with pytest.raises(SystemExit) as exited:
        parse_args(["-o", "x.wav"])
    assert exited.value.code == 2 and "the text to speak is required" in capsys.readouterr().err


def test_an_output_the_cli_cannot_write_is_refused_before_the_synthesis(tmp_path, capsys):
    # No server listens on port 1: the check must come before any request.
    for output, message in ((tmp_path, "it is a folder"), (tmp_path / "no" / "x.wav", "there is no folder"),
                            (tmp_path / "x.foo", "soundfile writes no '.foo' files")):
        assert main(["Hi.", "--url", "127.0.0.1:1", "-o", str(output)]) == 2
        assert message in capsys.readouterr().err


@pytest.mark.parametrize("option, message", [
    (["--timesteps", "3000000000"], "timesteps=3000000000 does not fit the server's int32 tensor"),
    (["--seed", str(2**63)], "does not fit the server's int64 tensor"),
])
def test_a_cli_value_its_tensor_cannot_hold_is_one_line_before_any_request(tmp_path, capsys, option, message):
    # No server listens on port 1: the value must be refused before the request.
    assert main(["Hi.", "--url", "127.0.0.1:1", "-o", str(tmp_path / "x.wav"), *option]) == 2
    err = capsys.readouterr().err
    assert err.startswith("invalid request: ") and message in err and "Traceback" not in err
