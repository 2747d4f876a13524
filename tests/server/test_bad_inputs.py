"""Every kind of bad input gets a clear error response naming the problem, never a crash or a hung
stream; afterwards the server still serves and the decoder holds no slot."""

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from client.streaming import VoxCPMClient, VoxCPMError, build_inputs

pytestmark = pytest.mark.server


def _raw(name, array, dtype):
    tensor = grpcclient.InferInput(name, list(array.shape), dtype)
    tensor.set_data_from_numpy(array)
    return tensor


def _text(value="Hello."):
    return _raw("TEXT", np.array([value.encode()], dtype=object), "BYTES")


CASES = {
    "no text": ([_raw("CFG_VALUE", np.array([2.0], np.float32), "FP32")], r"TEXT is required"),
    "empty text": (build_inputs(""), r"TEXT is empty"),
    "text over the limit": (build_inputs("word " * 2000), r"TEXT has 10000 characters; allowed 1\.\.4000"),
    "wrong dtype": ([_raw("TEXT", np.array([1], np.int32), "INT32")], r"input 'TEXT' data-type is 'INT32', but model 'voxcpm' expects 'BYTES'"),
    "wrong shape": ([_raw("TEXT", np.array([b"a", b"b"], dtype=object), "BYTES")], r"(?i)shape.*TEXT|TEXT.*shape"),
    "wrong parameter dtype": (
        [_text(), _raw("CFG_VALUE", np.array([2], np.int64), "INT64")],
        r"input 'CFG_VALUE' data-type is 'INT64', but model 'voxcpm' expects 'FP32'",
    ),
    "non-finite reference audio": (
        build_inputs("Hello.", prompt_audio=np.array([0.1, np.nan, 0.2] * 1000, np.float32), prompt_sample_rate=16000),
        r"PROMPT_AUDIO holds 1000 non-finite samples",
    ),
    "reference audio outside [-1, 1]": (
        build_inputs("Hello.", prompt_audio=np.full(1600, 1e30, np.float32), prompt_sample_rate=16000),
        r"PROMPT_AUDIO holds 1600 samples outside \[-1, 1\]",
    ),
    "empty reference audio": (
        build_inputs("Hello.", prompt_audio=np.zeros(0, np.float32), prompt_sample_rate=16000),
        r"PROMPT_AUDIO is empty",
    ),
    "reference audio without its rate": (
        build_inputs("Hello.", prompt_audio=np.zeros(1600, np.float32)),
        r"PROMPT_SAMPLE_RATE is required",
    ),
    "unsupported sample rate": (
        build_inputs("Hello.", prompt_audio=np.zeros(1600, np.float32), prompt_sample_rate=7),
        r"PROMPT_AUDIO sample rate 7 Hz is outside the supported 8000-192000 Hz",
    ),
    "two reference voices": (
        build_inputs("Hello.", prompt_audio=np.zeros(1600, np.float32), prompt_sample_rate=16000,
                     reference_audio=np.zeros(1600, np.float32), reference_sample_rate=16000),
        r"PROMPT_AUDIO without PROMPT_TEXT is a reference voice, and so is REFERENCE_AUDIO",
    ),
    "unknown voice id": (build_inputs("Hello.", voice_id="nobody"), r"VOICE_ID 'nobody' is not registered"),
    "cfg out of range": (build_inputs("Hello.", cfg_value=-1.0), r"CFG_VALUE=-1.0 is out of range; allowed 0.0..10.0"),
    "timesteps out of range": (build_inputs("Hello.", timesteps=0), r"TIMESTEPS=0 is out of range; allowed 1..100"),
    "max seconds out of range": (build_inputs("Hello.", max_seconds=1e5), r"MAX_SECONDS=100000.0 is out of range"),
    "seed out of range": (build_inputs("Hello.", seed=-5), r"SEED=-5 is out of range"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_a_clear_error_and_the_server_recovers(triton_server, case):
    inputs, message = CASES[case]
    client = VoxCPMClient(triton_server.grpc_url, timeout_s=60)
    with pytest.raises(VoxCPMError, match=message):
        for _ in client.stream_inputs(inputs):
            pass
    audio, rate, _ = client.synthesize("Still serving.", max_seconds=0.3, seed=1)
    assert audio.size > 0 and rate > 0
    assert triton_server.wait_idle() == 0, "a slot leaked"
