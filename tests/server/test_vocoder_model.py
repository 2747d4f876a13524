"""The vocoder model called on its own: a WINDOW without NEW_PATCHES returns one patch of audio, with
NEW_PATCHES = k the last k patches, and a count the window cannot hold is an error response."""

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


@pytest.mark.parametrize("new_patches, message", [(0, r"new_patches\[0\] = 0; must be >= 1"),
                                                  (6, r"has 5 patches for 6 new")])
def test_a_count_the_window_cannot_hold_is_refused(triton_server, new_patches, message):
    window = np.zeros((5, PATCH, LATENT), np.float32)
    with pytest.raises(grpcclient.InferenceServerException, match=message):
        _infer(triton_server.grpc_url, window, new_patches)
    assert _infer(triton_server.grpc_url, window).shape == (SAMPLES_PER_PATCH,)  # still serving
