"""The client CLI streams text (given, or piped in) into a WAV file and reports first-chunk latency
and RTF; it registers a voice from a WAV file and reuses it by name, and sends a reference voice and
NORMALIZE."""

import os
import subprocess
import sys

import numpy as np
import pytest
import soundfile

from tritonserver_process import REPO

pytestmark = pytest.mark.server


def _cli(*args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "client", *args], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env=env, input=stdin)


def test_cli_writes_wav_and_reports_latency(triton_server, tmp_path):
    out = tmp_path / "out.wav"
    run = _cli("Hello from the command line.", "-o", str(out), "--url", triton_server.grpc_url,
               "--max-seconds", "0.5", "--seed", "0")
    assert run.returncode == 0, run.stderr
    audio, rate = soundfile.read(out)
    assert rate == 48000 and 0 < audio.size <= 4 * 7680
    assert "first chunk" in run.stdout and "RTF" in run.stdout
    # Not a terminal: one progress line with the final count, no carriage-return updates.
    assert "\r" not in run.stdout
    progress = [line for line in run.stdout.splitlines() if line.endswith("s of audio")]
    assert len(progress) == 1 and progress[0].endswith(f" chunks, {audio.size / rate:.2f} s of audio"), run.stdout

    # Registering writes no audio: an output it could not write (here a folder) is no obstacle.
    run = _cli("--url", triton_server.grpc_url, "--register-only", "--voice-id", "cli-voice",
               "--prompt-wav", str(out), "--prompt-text", "Hello.", "-o", str(tmp_path))
    assert run.returncode == 0 and "registered voice 'cli-voice'" in run.stdout, run.stderr
    run = _cli("With that voice.", "-o", str(tmp_path / "voice.wav"), "--url", triton_server.grpc_url,
               "--voice-id", "cli-voice", "--max-seconds", "0.3", "--seed", "5")
    assert run.returncode == 0, run.stderr
    # The same words piped in give the same audio.
    run = _cli("-", "-o", str(tmp_path / "piped.wav"), "--url", triton_server.grpc_url,
               "--voice-id", "cli-voice", "--max-seconds", "0.3", "--seed", "5", stdin="With that voice.\n")
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(soundfile.read(tmp_path / "piped.wav")[0], soundfile.read(tmp_path / "voice.wav")[0])


def test_cli_reference_voice_changes_the_audio(triton_server, tmp_path):
    voice = tmp_path / "voice.wav"
    soundfile.write(voice, 0.3 * np.sin(np.arange(12000) * 0.05), 24000)
    common = ("Hello.", "--url", triton_server.grpc_url, "--max-seconds", "0.2", "--seed", "3")
    plain, imitated = tmp_path / "plain.wav", tmp_path / "imitated.wav"
    assert _cli(*common, "-o", str(plain)).returncode == 0
    run = _cli(*common, "-o", str(imitated), "--reference-wav", str(voice))
    assert run.returncode == 0, run.stderr
    plain_audio, imitated_audio = soundfile.read(plain)[0], soundfile.read(imitated)[0]
    assert plain_audio.shape == imitated_audio.shape and not np.allclose(plain_audio, imitated_audio)


def test_cli_normalize_changes_the_audio(triton_server, tmp_path):
    pytest.importorskip("wetext")
    common = ("I have 2 apples.", "--url", triton_server.grpc_url, "--max-seconds", "0.2", "--seed", "4")
    plain, spoken = tmp_path / "plain.wav", tmp_path / "spoken.wav"
    assert _cli(*common, "-o", str(plain)).returncode == 0
    run = _cli(*common, "-o", str(spoken), "--normalize")
    assert run.returncode == 0, run.stderr
    assert not np.allclose(soundfile.read(plain)[0], soundfile.read(spoken)[0])


def test_cli_reports_server_errors(triton_server, tmp_path):
    run = _cli("Hi.", "-o", str(tmp_path / "x.wav"), "--url", triton_server.grpc_url, "--voice-id", "nobody")
    assert run.returncode == 1
    assert "VOICE_ID 'nobody' is not registered" in run.stderr


def test_cli_reaches_a_local_server_past_an_http_proxy_setting(triton_server, tmp_path):
    # A machine that reaches its package index through a proxy may set one for every address.
    dead_proxy = "http://127.0.0.1:9"
    env = {key: value for key, value in os.environ.items() if key.lower() != "no_proxy"}
    env.update(http_proxy=dead_proxy, https_proxy=dead_proxy, HTTP_PROXY=dead_proxy, HTTPS_PROXY=dead_proxy)
    run = _cli("Hello.", "-o", str(tmp_path / "out.wav"), "--url", triton_server.grpc_url, "--max-seconds", "0.2",
               env=env)
    assert run.returncode == 0, run.stderr


def test_cli_without_a_server_says_so(tmp_path):
    import socket
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    run = _cli("Hello.", "-o", str(tmp_path / "out.wav"), "--url", f"127.0.0.1:{port}")
    assert run.returncode == 1 and "Traceback" not in run.stderr
    # Whether the refusal is seen as the stream starts or on its first reply, the cause is named.
    assert run.stderr.startswith("server error: ") and "failed to connect" in run.stderr, run.stderr
    run = _cli("Hello.", "--url", f"127.0.0.1:{port}", "--reference-wav", str(tmp_path / "missing.wav"))
    assert run.returncode == 2 and run.stderr.startswith("cannot read the voice's audio"), run.stderr
