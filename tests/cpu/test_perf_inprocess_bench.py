"""The in-process bench on a tiny checkpoint: every request gets exactly the forced length, rounds
resubmit, and the chunks it times are real vocoder output."""

from __future__ import annotations

import pytest
import torch

from perf.force_length import zero_tensor
from perf.inprocess_bench import InProcessSystem


@pytest.fixture(scope="module")
def system(tmp_path_factory):
    from voxcpm_triton.checkpoint.make import make_checkpoint

    folder = make_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny", "voxcpm2", size="tiny")
    zero_tensor(folder / "model.safetensors")
    return InProcessSystem(str(folder), "cpu", torch.float32, max_slots=2, max_context=4096)


def test_level_forces_length_and_runs_rounds(system):
    patches = 3
    records = system.run_level(concurrency=2, rounds=2, first_index=5, patches=patches, seed=1)
    assert sorted(r.request_id for r in records) == [f"ours-{i}" for i in range(5, 9)]
    assert all(r.ok for r in records), [r.error for r in records]
    samples = patches * system.vocoder.samples_per_patch
    assert all(r.audio_samples == samples and r.chunks == 2 for r in records)  # 1 patch, then 2
    assert system.sample_rate == 48000 and system.max_context == 512  # clamped to the tiny config
