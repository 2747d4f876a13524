"""Audio streamed through the server equals the in-process streaming output of the model core
(voxcpm_triton.api.VoxCPM.generate with the same seed), chunk by chunk, for the model's own voice,
a continuation prompt, a VoxCPM2 reference voice, both at once, a voice registered by VOICE_ID, and
text put in spoken form (NORMALIZE)."""

import numpy as np
import pytest

from client.streaming import VoxCPMClient

pytestmark = pytest.mark.server

TEXT = "Streaming through Triton."
ATOL = 1e-5  # same fp32 CPU code on both sides; only batching order could differ
# The session's checkpoint never predicts a stop: MAX_SECONDS=1.0 is ceil(1.0 / 0.16) = 7 patches,
# which the in-process side asks for as max_len.
SECONDS, PATCHES = 1.0, 7


@pytest.fixture(scope="module")
def in_process(tiny_checkpoint):
    from voxcpm_triton.api import VoxCPM

    tts = VoxCPM.from_pretrained(tiny_checkpoint, devices="cpu")
    yield tts
    tts.close()


@pytest.fixture(scope="module")
def voice():
    """Half a second of a voiced-like test signal at 16 kHz."""
    rate = 16000
    t = np.arange(rate // 2) / rate
    noise = np.random.default_rng(0).standard_normal(t.size)
    return (0.3 * np.sin(2 * np.pi * 180 * t) + 0.02 * noise).astype(np.float32), rate


def _assert_same_chunks(server_chunks, local_chunks):
    assert len(server_chunks) == len(local_chunks) > 0
    for index, (got, want) in enumerate(zip(server_chunks, local_chunks)):
        assert got.shape == want.shape, index
        np.testing.assert_allclose(got, want, rtol=0, atol=ATOL, err_msg=f"chunk {index}")


def test_zero_shot_stream_equals_in_process(triton_server, in_process):
    server = list(VoxCPMClient(triton_server.grpc_url).stream(TEXT, seed=11, max_seconds=SECONDS))
    local = list(in_process.generate(TEXT, seed=11, max_len=PATCHES))
    assert [len(chunk) // 7680 for chunk in local] == [1, 2, 4]  # audio.chunks' doubling, 160 ms patches
    _assert_same_chunks(server, local)


def test_sampling_parameters_reach_the_engine(triton_server, in_process):
    client = VoxCPMClient(triton_server.grpc_url)
    server = list(client.stream(TEXT, seed=12, cfg_value=1.5, timesteps=4, max_seconds=SECONDS))
    local = list(in_process.generate(TEXT, seed=12, cfg_value=1.5, inference_timesteps=4, max_len=PATCHES))
    _assert_same_chunks(server, local)
    other_seed = list(client.stream(TEXT, seed=13, cfg_value=1.5, timesteps=4, max_seconds=SECONDS))
    assert not np.allclose(np.concatenate(other_seed[:1]), np.concatenate(server[:1]))


def test_prompt_voice_equals_in_process_and_is_reused_by_voice_id(triton_server, in_process, voice):
    audio, rate = voice
    client = VoxCPMClient(triton_server.grpc_url)
    server = list(client.stream(TEXT, seed=21, prompt_audio=audio, prompt_sample_rate=rate,
                                prompt_text="A prompt.", voice_id="prompted", max_seconds=SECONDS))
    local = list(in_process.generate(TEXT, seed=21, prompt_wav=audio, prompt_sample_rate=rate, prompt_text="A prompt.",
                                     max_len=PATCHES))
    _assert_same_chunks(server, local)
    again = list(client.stream(TEXT, seed=21, voice_id="prompted", max_seconds=SECONDS))
    _assert_same_chunks(again, local)


def test_reference_voice_equals_in_process(triton_server, in_process, voice):
    audio, rate = voice
    client = VoxCPMClient(triton_server.grpc_url)
    client.register_voice("imitated", audio, rate)
    server = list(client.stream(TEXT, seed=31, voice_id="imitated", max_seconds=SECONDS))
    local = list(in_process.generate(TEXT, seed=31, reference_wav=audio, reference_sample_rate=rate, max_len=PATCHES))
    _assert_same_chunks(server, local)
    assert triton_server.wait_idle() == 0


def test_reference_beside_a_prompt_equals_in_process(triton_server, in_process, voice):
    audio, rate = voice
    reference = np.ascontiguousarray(audio[::-1])  # a second voice, 0.5 s like the first
    client = VoxCPMClient(triton_server.grpc_url)
    server = list(client.stream(TEXT, seed=41, prompt_audio=audio, prompt_sample_rate=rate, prompt_text="A prompt.",
                                reference_audio=reference, reference_sample_rate=rate, voice_id="both",
                                max_seconds=SECONDS))
    local = list(in_process.generate(TEXT, seed=41, prompt_wav=audio, prompt_sample_rate=rate, prompt_text="A prompt.",
                                     reference_wav=reference, reference_sample_rate=rate, max_len=PATCHES))
    _assert_same_chunks(server, local)
    _assert_same_chunks(list(client.stream(TEXT, seed=41, voice_id="both", max_seconds=SECONDS)), local)
    prompt_only = list(in_process.generate(TEXT, seed=41, prompt_wav=audio, prompt_sample_rate=rate,
                                           prompt_text="A prompt.", max_len=PATCHES))
    assert not np.allclose(server[0], prompt_only[0]), "the reference voice must change the audio"
    assert triton_server.wait_idle() == 0


def test_normalized_text_equals_in_process(triton_server, in_process):
    pytest.importorskip("wetext")
    text = "Paid $3.50 for 2 apples."
    client = VoxCPMClient(triton_server.grpc_url)
    server = list(client.stream(text, seed=51, normalize=True, max_seconds=SECONDS))
    _assert_same_chunks(server, list(in_process.generate(text, seed=51, normalize=True, max_len=PATCHES)))
    as_written = list(client.stream(text, seed=51, max_seconds=SECONDS))
    assert not np.allclose(server[0], as_written[0]), "NORMALIZE must reach the text_encoder"
