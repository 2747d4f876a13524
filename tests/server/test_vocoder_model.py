"""The vocoder model called on its own: a WINDOW without NEW_PATCHES returns one patch of audio, with
NEW_PATCHES = k the last k patches; a count the window cannot hold, or more than one window in a
request, is an error response naming the tensor."""

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

pytestmark = pytest.mark.server

PATCH, LATENT, SAMPLES_PER_PATCH = 4, 16, 7680  # the tiny VoxCPM2 checkpoint


def _infer(url: str, window: np.ndarray, new_patches: int | None = None) -> np.ndarray:
    inputs = [grpcclient.InferInput("WINDOW", [1, *window.shape], "FP32")]
    inputs[0].set_data_from_numpy(window[None])
    if new_patches is not None:
        inputs.append(grpcclient.InferInput("NEW_PATCHES", [1, 1], "INT32"))
        inputs[1].set_data_from_numpy(np.array([[new_patches]], np.int32))
    with grpcclient.InferenceServerClient(url) as client:
        return client.infer("vocoder", inputs).as_numpy("AUDIO")[0]


def test_new_patches_select_how_much_audio_comes_back(triton_server):
    window = np.random.default_rng(0).standard_normal((5, PATCH, LATENT)).astype(np.float32)
    one = _infer(triton_server.grpc_url, window)
    assert one.shape == (SAMPLES_PER_PATCH,)
    np.testing.assert_array_equal(_infer(triton_server.grpc_url, window, 1), one)
    three = _infer(triton_server.grpc_url, window, 3)
    assert three.shape == (3 * SAMPLES_PER_PATCH,)
    np.testing.assert_allclose(three[-SAMPLES_PER_PATCH:], one, rtol=0, atol=1e-5)


@pytest.mark.parametrize("new_patches", [0, 6, 10**9])
def test_a_count_the_window_cannot_hold_is_refused(triton_server, new_patches):
    window = np.zeros((5, PATCH, LATENT), np.float32)
    message = rf"NEW_PATCHES = {new_patches}; allowed 1\.\.5 \(the patches of WINDOW\)"
    with pytest.raises(grpcclient.InferenceServerException, match=message):
        _infer(triton_server.grpc_url, window, new_patches)
    assert _infer(triton_server.grpc_url, window).shape == (SAMPLES_PER_PATCH,)  # still serving


def test_a_request_of_two_windows_is_refused(triton_server):
    # Each request is one window; a batch of two would otherwise come back as one window's audio.
    windows = np.zeros((2, 5, PATCH, LATENT), np.float32)
    tensor = grpcclient.InferInput("WINDOW", list(windows.shape), "FP32")
    tensor.set_data_from_numpy(windows)
    with grpcclient.InferenceServerClient(triton_server.grpc_url) as client:
        message = r"WINDOW shape \(2, 5, 4, 16\); expected \[n, 4, 16\]"
        with pytest.raises(grpcclient.InferenceServerException, match=message):
            client.infer("vocoder", [tensor])
