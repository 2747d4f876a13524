"""A LoRA adapter named by VOXCPM_LORA is merged into the served decoder: the stream equals the
in-process output with the same adapter, and differs from the checkpoint without it."""

import numpy as np
import pytest

from client.streaming import VoxCPMClient
from tests.lora_adapters import random_pairs, write_adapter
from tritonserver_process import REPO, start_server

pytestmark = pytest.mark.server

TEXT = "A fine-tuned voice."


@pytest.fixture(scope="module")
def adapter(tiny_checkpoint, tmp_path_factory):
    """Random pairs on every attention projection of the base LM and the LocDiT, at r 4."""
    pairs = random_pairs(tiny_checkpoint, ("base_lm.", "feat_decoder.estimator."), r=4, scale=0.3, seed=5)
    settings = {"enable_lm": True, "enable_dit": True, "r": 4, "alpha": 8}
    return write_adapter(tmp_path_factory.mktemp("adapter"), pairs, settings)


@pytest.fixture(scope="module")
def adapted_server(tiny_checkpoint, adapter, tmp_path_factory):
    server = start_server(REPO / "model_repository", tmp_path_factory.mktemp("tritonserver"),
                          {"VOXCPM_CHECKPOINT": str(tiny_checkpoint), "VOXCPM_LORA": str(adapter)})
    yield server
    server.stop()


def test_served_adapter_equals_in_process(adapted_server, tiny_checkpoint, adapter, triton_server):
    from voxcpm_triton.api import VoxCPM

    served = list(VoxCPMClient(adapted_server.grpc_url).stream(TEXT, seed=8, max_seconds=0.5))
    tts = VoxCPM.from_pretrained(tiny_checkpoint, devices="cpu", lora=adapter)
    try:
        local = list(tts.generate(TEXT, seed=8, max_len=4))
    finally:
        tts.close()
    np.testing.assert_allclose(np.concatenate(served), np.concatenate(local), rtol=0, atol=1e-5)
    plain = list(VoxCPMClient(triton_server.grpc_url).stream(TEXT, seed=8, max_seconds=0.5))
    assert not np.allclose(np.concatenate(plain), np.concatenate(served)), "the adapter must change the audio"
    assert "LoRA adapter" in adapted_server.log() and str(adapter) in adapted_server.log()
