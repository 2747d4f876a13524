"""The engine on a CUDA device: same patches as on the CPU (fp32, TF32 off), batch composition does
not change a stream, and a bf16 engine of the real VoxCPM2 shapes runs steps with ragged streams."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.cpu.engine_harness import make_request, run_to_completion
from tests.cpu.test_engine_batching import mixed_requests, tiny_model
from voxcpm_triton.engine.engine import Engine
from voxcpm_triton.engine.noise import block_from_env

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.usefixtures("no_tf32"),
]

TOLERANCE = 1e-4  # fp32 with TF32 disabled


def cuda_engine(model, slots: int = 8) -> Engine:
    return Engine(model, max_slots=slots, max_context=model.config.max_length, device="cuda", window_patches=4)


def test_cuda_matches_cpu_first_patches():
    """The GPU draws its noise from a CUDA generator; the CPU run is fed the same draws, so the
    patches must agree to fp32 accuracy."""
    cpu_model = tiny_model("voxcpm2")
    gpu_model = tiny_model("voxcpm2").cuda()
    request = lambda: make_request(cpu_model, "g", [120, 121, 122], min_len=8, max_len=6, seed=3)
    on_gpu = run_to_completion(cuda_engine(gpu_model), [request()])["g"]
    # Replay on the CPU with the GPU's noise stream: one block of patches drawn at the first step.
    engine = Engine(cpu_model, max_slots=1, max_context=cpu_model.config.max_length, device="cpu", window_patches=4)
    generator = torch.Generator(device="cuda").manual_seed(3)
    shape = (block_from_env(), cpu_model.config.feat_dim, cpu_model.config.patch_size)
    block = torch.empty(shape, device="cuda").normal_(generator=generator).cpu()
    draws = [block[i:i + 1] for i in range(6)]
    engine.runner._noise = lambda streams: draws.pop(0).transpose(1, 2)
    on_cpu = run_to_completion(engine, [request()])["g"]
    assert np.abs(on_gpu - on_cpu).max() <= TOLERANCE


@pytest.mark.parametrize("variant", ["voxcpm2", "voxcpm1.5"])
def test_batch_of_8_equals_alone_on_cuda(variant):
    model = tiny_model(variant).cuda()
    batch = run_to_completion(cuda_engine(model), mixed_requests(model, 8))
    for i in (0, 5, 7):
        alone = run_to_completion(cuda_engine(model, slots=1), [mixed_requests(model, 8)[i]])[f"s{i}"]
        assert alone.shape == batch[f"s{i}"].shape
        assert np.abs(alone - batch[f"s{i}"]).max() <= TOLERANCE


def test_full_size_voxcpm2_bf16_steps():
    """Random weights of the real shapes: 16 ragged streams, prompts 10..160 positions."""
    from voxcpm_triton.checkpoint.make import config_dict
    from voxcpm_triton.config import parse_config
    from voxcpm_triton.model.voxcpm import build_model

    config = parse_config(config_dict("voxcpm2", "full"))
    with torch.device("cuda"):
        model = build_model(config).to(torch.bfloat16).eval()
    engine = Engine(model, max_slots=16, max_context=1024, device="cuda", window_patches=4)
    for i in range(16):
        tokens = torch.randint(200, 1000, (10 + 10 * i,))
        engine.submit(make_request(model, f"f{i}", tokens, min_len=50, max_len=5, seed=i))
    produced = {f"f{i}": 0 for i in range(16)}
    while engine.has_work:
        for output in engine.step():
            assert output.error is None and np.isfinite(output.window).all()
            produced[output.request_id] += 1
    assert set(produced.values()) == {5}


def test_api_on_cuda_streams_whole_patch_chunks(tmp_path):
    from voxcpm_triton.api import VoxCPM
    from voxcpm_triton.checkpoint.make import make_checkpoint

    folder = make_checkpoint(tmp_path / "tiny", "voxcpm2", size="tiny")
    tts = VoxCPM.from_pretrained(folder, devices=[0], dtype="bfloat16")
    try:
        assert tts._devices[0].engine.runner.device == torch.device("cuda:0")
        chunks = list(tts.generate("hello world", seed=1, max_len=9, min_len=9))
        config = tts._devices[0].checkpoint.config
        assert [c.size // config.samples_per_patch for c in chunks] == [1, 2, 4, 2]  # audio.chunks
        assert all(c.size % config.samples_per_patch == 0 and np.isfinite(c).all() for c in chunks)
    finally:
        tts.close()


def test_device_part_of_a_step_never_syncs():
    """The step's only device-to-host copy is the final one in ModelRunner.decode: the eager
    fixed-shape step (`_fixed_advance`, here with a batch mixing 10 and 6 timesteps) must not
    synchronise at all."""
    model = tiny_model("voxcpm2").cuda()
    engine = Engine(model, max_slots=8, max_context=model.config.max_length, device="cuda", window_patches=4,
                    cuda_graphs=False)
    for request in mixed_requests(model, 4):
        request.min_len = request.max_len = 20
        engine.submit(request)
    engine.step()  # prefill + first decode (builds the cached Euler schedules)
    streams = list(engine.scheduler.running.values())
    runner = engine.runner
    index = torch.tensor([[s.slot for s in streams], [1] * len(streams)], device="cuda")
    groups = runner._timestep_groups(streams)
    assert len(groups) == 2
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        with torch.inference_mode():
            runner._fixed_advance(index, groups)
    finally:
        torch.cuda.set_sync_debug_mode("default")
