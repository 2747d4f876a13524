"""The engine and the vocoder on the second GPU, built and driven from threads that never made it the
current device (as Triton's ar_decoder instance on GPU 1 steps its engine from a thread of its own,
and `VoxCPM.from_pretrained(devices=[0, 1])` does in one process): the same patches and audio as on
the first GPU, from captured graphs. Skipped without two CUDA GPUs."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import pytest
import torch

from tests.cpu.engine_harness import run_to_completion
from tests.cpu.test_engine_batching import mixed_requests, tiny_model
from tests.gpu.vocoder_checks import FP32_TOLERANCE, PATCH_SIZE, full_windows
from voxcpm_triton.audio.audio_vae import AudioVAE
from voxcpm_triton.audio.vocoder import WindowedVocoder
from voxcpm_triton.engine.engine import Engine

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two CUDA GPUs"),
    pytest.mark.usefixtures("no_tf32"),
]

TOLERANCE = 1e-5  # the same fp32 kernels on two GPUs of one kind
R = TypeVar("R")


def in_new_thread(fn: Callable[[], R]) -> R:
    """fn() in a fresh thread, whose current CUDA device is 0."""
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["device"] = torch.cuda.current_device()
            outcome["value"] = fn()
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    assert outcome["device"] == 0
    return outcome["value"]


def engine_on(device: str, model) -> Engine:
    return Engine(model, max_slots=8, max_context=model.config.max_length, device=device, window_patches=4)


def test_engine_on_the_second_gpu_matches_the_first():
    first, second = tiny_model("voxcpm2").to("cuda:0"), tiny_model("voxcpm2").to("cuda:1")
    expected = run_to_completion(engine_on("cuda:0", first), mixed_requests(first, 6))
    engine = in_new_thread(lambda: engine_on("cuda:1", second))
    got = in_new_thread(lambda: run_to_completion(engine, mixed_requests(second, 6)))
    graphs = engine.runner.graphs
    assert graphs is not None and graphs.failure is None and graphs.captured
    for request_id, patches in expected.items():
        assert got[request_id].shape == patches.shape
        assert np.abs(got[request_id] - patches).max() <= TOLERANCE, request_id


def test_vocoder_on_the_second_gpu_matches_the_first(gpu_vae: AudioVAE):
    windows = full_windows(5, 6, seed=9)
    expected = np.stack(WindowedVocoder(gpu_vae, PATCH_SIZE, dtype=torch.float32).decode(windows))
    second_vae = copy.deepcopy(gpu_vae).to("cuda:1")
    vocoder = in_new_thread(lambda: WindowedVocoder(second_vae, PATCH_SIZE, dtype=torch.float32))
    assert vocoder.graphs is not None and vocoder.graphs.failure is None and vocoder.graphs.captured
    got = np.stack(in_new_thread(lambda: vocoder.decode(windows)))
    assert np.abs(got - expected).max() <= FP32_TOLERANCE
