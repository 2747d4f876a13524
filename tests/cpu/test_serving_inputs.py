"""Edge validation of request tensors and sampling parameters (voxcpm_triton.serving.inputs,
voxcpm_triton.serving.parameters): each bad value gets a message naming the tensor."""

import numpy as np
import pytest

from voxcpm_triton.serving import inputs
from voxcpm_triton.serving.inputs import InputError
from voxcpm_triton.serving.parameters import SamplingParameters, read_sampling_parameters


def test_text_reads_one_utf8_string_with_or_without_batch_dim():
    assert inputs.text("TEXT", np.array([["héllo".encode()]], dtype=object)) == "héllo"
    assert inputs.text("TEXT", np.array(["hi".encode()], dtype=object)) == "hi"


@pytest.mark.parametrize(
    "array, message",
    [
        (None, "TEXT is required"),
        (np.array([b"a", b"b"], dtype=object), "exactly one string, got 2"),
        (np.array([b"\xff\xfe"], dtype=object), "not valid UTF-8"),
    ],
)
def test_text_errors_name_the_tensor(array, message):
    with pytest.raises(InputError, match=message):
        inputs.text("TEXT", array)


def test_optional_text_absent_is_none():
    assert inputs.text("PROMPT_TEXT", None, required=False) is None


def test_audio_accepts_batched_mono_and_rejects_bad_waveforms():
    wave = inputs.audio("PROMPT_AUDIO", np.ones((1, 5), np.float32))
    assert wave.shape == (5,) and wave.dtype == np.float32
    with pytest.raises(InputError, match="PROMPT_AUDIO is empty"):
        inputs.audio("PROMPT_AUDIO", np.zeros((1, 0), np.float32))
    with pytest.raises(InputError, match="2 non-finite samples"):
        inputs.audio("PROMPT_AUDIO", np.array([[0.1, np.nan, np.inf]], np.float32))
    with pytest.raises(InputError, match="1-D mono waveform"):
        inputs.audio("PROMPT_AUDIO", np.zeros((2, 3, 4), np.float32))
    with pytest.raises(InputError, match=r"REFERENCE_AUDIO holds 2 samples outside \[-1, 1\] \(peak 3.277e\+04\)"):
        inputs.audio("REFERENCE_AUDIO", np.array([0.5, -32768.0, 1.5, -1.0], np.float32))


def _getter(**values):
    return lambda name: None if name not in values else np.array([values[name]])


def test_sampling_parameter_defaults_and_random_seed():
    first = read_sampling_parameters(_getter())
    assert (first.cfg_value, first.timesteps, first.max_seconds) == (2.0, 10, None)
    seeds = {read_sampling_parameters(_getter()).seed for _ in range(4)}
    assert len(seeds) > 1, "requests without SEED must not share one seed"
    assert read_sampling_parameters(_getter(SEED=7)).seed == 7


@pytest.mark.parametrize(
    "values, message",
    [
        ({"CFG_VALUE": -1.0}, r"CFG_VALUE=-1.0 is out of range; allowed 0.0..10.0"),
        ({"CFG_VALUE": float("nan")}, "CFG_VALUE must be finite"),
        ({"TIMESTEPS": 0}, r"TIMESTEPS=0 is out of range; allowed 1..100"),
        ({"MAX_SECONDS": 0.0}, r"MAX_SECONDS=0.0 is out of range"),
        ({"MAX_SECONDS": 1e6}, r"MAX_SECONDS=1000000.0 is out of range"),
        ({"SEED": -3}, r"SEED=-3 is out of range"),
    ],
)
def test_sampling_parameters_out_of_range(values, message):
    with pytest.raises(InputError, match=message):
        read_sampling_parameters(_getter(**values))


def test_max_seconds_to_patches_rounds_up():
    parameters = SamplingParameters(2.0, 10, 0.5, 0)
    assert parameters.max_patches(0.16) == 4
    assert SamplingParameters(2.0, 10, 0.32, 0).max_patches(0.16) == 2
    assert SamplingParameters(2.0, 10, None, 0).max_patches(0.16) is None


@pytest.mark.parametrize("seconds_per_patch", (0.16, 0.08, 640 / 16000, 4 * 1920 / 48000))
def test_max_seconds_of_whole_patches_as_fp32_gives_that_many(seconds_per_patch):
    for count in range(1, 3751):
        sent = float(np.float32(count * seconds_per_patch))  # what the FP32 tensor holds
        assert SamplingParameters(2.0, 10, sent, 0).max_patches(seconds_per_patch) == count, sent
    assert SamplingParameters(2.0, 10, float(np.float32(0.5)), 0).max_patches(0.16) == 4  # 3.125: rounded up
    assert SamplingParameters(2.0, 10, 0.1, 0).max_patches(0.16) == 1
