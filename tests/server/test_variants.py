"""The same repository serves the other architecture ("voxcpm": VoxCPM1.5 / VoxCPM-0.5B): which
checkpoint is served is the one setting VOXCPM_CHECKPOINT. A tiny VoxCPM-0.5B (patch size 2,
16 kHz) streams at its own rate and equals the in-process output. One variant keeps the tier quick;
1.5 differs from it only in sizes and rate."""

import math

import numpy as np
import pytest

from client.streaming import VoxCPMClient
from tritonserver_process import REPO, start_server

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    from voxcpm_triton.checkpoint.make import make_checkpoint

    folder = make_checkpoint(tmp_path_factory.mktemp("voxcpm0.5b") / "tiny", "voxcpm0.5b", size="tiny")
    server = start_server(REPO / "model_repository", tmp_path_factory.mktemp("tritonserver"),
                          {"VOXCPM_CHECKPOINT": str(folder)})
    yield folder, server
    server.stop()


def test_voxcpm_0_5b_streams_at_16_khz_and_equals_in_process(small_model):
    from voxcpm_triton.api import VoxCPM

    folder, server = small_model
    client = VoxCPMClient(server.grpc_url)
    chunks = list(client.stream("Another model.", seed=9, max_seconds=0.5))
    audio, rate, _ = client.synthesize("Another model.", seed=9, max_seconds=0.5)
    assert rate == 16000
    samples_per_patch = chunks[0].size  # the first chunk is one patch: 80 ms, patch size 2
    patches = sum(chunk.size for chunk in chunks) // samples_per_patch
    assert samples_per_patch == 1280 and patches <= math.ceil(0.5 * rate / samples_per_patch - 1e-6)
    tts = VoxCPM.from_pretrained(folder, devices="cpu")
    try:
        local = list(tts.generate("Another model.", seed=9, max_len=patches))
    finally:
        tts.close()
    np.testing.assert_allclose(np.concatenate(chunks), np.concatenate(local), rtol=0, atol=1e-5)
    np.testing.assert_array_equal(audio, np.concatenate(chunks))
