"""With VOXCPM_VOICE_FOLDER (the text_encoder's voice_folder setting) a registered voice outlives its
server: a fresh server naming the same folder streams it, as the first server did."""

import numpy as np
import pytest

from client.streaming import VoxCPMClient, VoxCPMError
from tritonserver_process import REPO, start_server

pytestmark = pytest.mark.server


def test_a_voice_outlives_its_server(tiny_checkpoint, tmp_path):
    env = {"VOXCPM_CHECKPOINT": str(tiny_checkpoint), "VOXCPM_VOICE_FOLDER": str(tmp_path / "voices")}
    voice = (0.3 * np.sin(np.arange(8000) * 0.05)).astype(np.float32)
    for workdir in ("first", "second"):
        (tmp_path / workdir).mkdir()
    first = start_server(REPO / "model_repository", tmp_path / "first", env)
    try:
        client = VoxCPMClient(first.grpc_url)
        client.register_voice("kept", reference_audio=voice, reference_sample_rate=16000)
        before = list(client.stream("Hello again.", seed=2, voice_id="kept", max_seconds=0.3))
    finally:
        first.stop()
    assert len(list((tmp_path / "voices").glob("*.pt"))) == 1
    second = start_server(REPO / "model_repository", tmp_path / "second", env)
    try:
        client = VoxCPMClient(second.grpc_url)
        after = list(client.stream("Hello again.", seed=2, voice_id="kept", max_seconds=0.3))
        with pytest.raises(VoxCPMError, match="VOICE_ID 'other' is not registered"):
            list(client.stream("Hello.", voice_id="other", max_seconds=0.3))
    finally:
        second.stop()
    np.testing.assert_array_equal(np.concatenate(after), np.concatenate(before))
