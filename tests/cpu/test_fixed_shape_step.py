"""The fixed-shape decode step (what the CUDA engine runs and captures as a graph), run on the CPU
where the custom ops fall back to their references: same patches as the reference-faithful path,
padding rows leave every stream alone, and batch composition does not change a stream."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.cpu.engine_harness import run_to_completion
from tests.cpu.test_engine_batching import mixed_requests, tiny_model
from voxcpm_triton.engine import runner as runner_module
from voxcpm_triton.engine.engine import Engine
from voxcpm_triton.engine.runner import ModelRunner
from voxcpm_triton.model import fast_path, minicpm
from voxcpm_triton.model.fast_path import enable_custom_ops
from voxcpm_triton.model.rms_norm import RMSNorm
from voxcpm_triton.ops import skinny_linear

TOLERANCE = 2e-5  # fp32; the ops' references round a few intermediates differently (fp32 CFG-Euler)


def engine(model, slots: int, **fixed) -> Engine:
    built = Engine(model, max_slots=slots, max_context=model.config.max_length, device="cpu", window_patches=4)
    if fixed:
        built.runner = ModelRunner(model, slots, model.config.max_length, torch.device("cpu"), fixed_shape=True,
                                   **fixed)
    return built


@pytest.mark.parametrize("variant", ["voxcpm2", "voxcpm0.5b"])
@pytest.mark.parametrize("kernel_attention,custom_ops", [(False, False), (True, False), (True, True)])
def test_fixed_step_matches_reference_path(monkeypatch, variant, kernel_attention, custom_ops):
    monkeypatch.setenv("VOXCPM_NOISE_BLOCK", "1")  # one draw per step, as the reference path draws
    assert_matches_plain_engine(tiny_model(variant), kernel_attention=kernel_attention, custom_ops=custom_ops)


def assert_matches_plain_engine(model, **options) -> None:
    """The engine built with `options` gives the patches of a plain one (no custom ops, the
    reference attention) for the same six mixed requests."""
    try:
        fixed = run_to_completion(engine(model, 8, **options), mixed_requests(model, 6))
        enable_custom_ops(model, False)
        plain = run_to_completion(engine(model, 8), mixed_requests(model, 6))
    finally:
        enable_custom_ops(model, False)
    for rid, patches in plain.items():
        assert fixed[rid].shape == patches.shape
        assert np.abs(fixed[rid] - patches).max() <= TOLERANCE, rid


@pytest.mark.parametrize("variant", ["voxcpm2", "voxcpm0.5b"])
def test_norms_inside_the_gemms_match_reference_path(monkeypatch, variant):
    """The few-row layer path (normed_forward / normed_decode: each RMSNorm inside the GEMM that
    reads it, residual adds inside o_proj and down_proj) taken at every batch size; on the CPU its
    ops fall back to norm + GEMM + add, so this checks the residual stream's plumbing."""
    monkeypatch.setenv("VOXCPM_NOISE_BLOCK", "1")
    monkeypatch.setattr(skinny_linear, "takes_normed", lambda x, weight: weight is not None)
    model = tiny_model(variant)
    for module in model.modules():  # non-unit gains, so a norm applied twice or not at all shows
        if isinstance(module, RMSNorm):
            module.weight.data.uniform_(0.5, 1.5, generator=torch.Generator().manual_seed(module.weight.numel()))
    assert_matches_plain_engine(model, kernel_attention=True, custom_ops=True)


@pytest.mark.parametrize("variant", ["voxcpm2", "voxcpm0.5b"])
@pytest.mark.parametrize("part", ["lms", "encoder", "dit"])
def test_folded_statistics_match_reference_path(monkeypatch, variant, part):
    """The paths where the kernel after a folded GEMM computes the norm's statistic (the LMs'
    folded_decode, which the GPU runs at 33+ streams, taken here at every batch size; LocEnc's and
    the LocDiT's folded_plain_forward, taken here from 1 row): the same patches as the plain
    engine, up to fp32 rounding."""
    monkeypatch.setenv("VOXCPM_NOISE_BLOCK", "1")
    monkeypatch.setattr(skinny_linear, "PLAIN_MAX_ROWS", 0)
    held = []
    lms, encoder, dit = (part == name for name in ("lms", "encoder", "dit"))
    monkeypatch.setattr(runner_module, "enable_folded_statistics",
                        lambda model, *_: held.append(fast_path.enable_folded_statistics(model, lms, encoder, dit)))
    model = tiny_model(variant)
    for module in model.modules():  # non-unit gains, so a norm applied twice or not at all shows
        if isinstance(module, RMSNorm):
            module.weight.data.uniform_(0.5, 1.5, generator=torch.Generator().manual_seed(module.weight.numel()))
    calls = []
    for name in ("folded_decode", "folded_plain_forward"):
        original = getattr(minicpm.DecoderLayer, name)
        monkeypatch.setattr(minicpm.DecoderLayer, name, lambda self, *args, name=name, original=original:
                            calls.append(name) or original(self, *args))
    try:
        assert_matches_plain_engine(model, kernel_attention=True, custom_ops=True)
    finally:
        fast_path.enable_folded_statistics(model, False, False, False)
    assert held and held[0] > 0  # the folded copies were made ...
    assert set(calls) == ({"folded_decode"} if lms else {"folded_plain_forward"})  # ... and their path ran
    stacks = (model.base_lm, model.feat_encoder.encoder, model.feat_decoder.estimator.decoder)
    assert all(layer.self_attn.folded_qkv is None and layer.mlp.folded_plain_gate_up is None
               for stack in stacks for layer in stack.layers)


def test_padding_rows_and_batch_composition(monkeypatch):
    """Block of 4 noise patches: a stream gives the same patches alone and in a batch of 6."""
    monkeypatch.setenv("VOXCPM_NOISE_BLOCK", "4")
    model = tiny_model("voxcpm2")
    try:
        batch = run_to_completion(engine(model, 8, kernel_attention=True, custom_ops=True), mixed_requests(model, 6))
        for i in (0, 3, 5):
            alone = run_to_completion(engine(model, 2, kernel_attention=True, custom_ops=True),
                                      [mixed_requests(model, 6)[i]])[f"s{i}"]
            assert np.abs(alone - batch[f"s{i}"]).max() <= TOLERANCE
    finally:
        enable_custom_ops(model, False)


def test_custom_ops_keep_state_dict():
    model = tiny_model("voxcpm2")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    enable_custom_ops(model, True)
    enable_custom_ops(model, False)
    enable_custom_ops(model, True)
    try:
        attention = model.base_lm.layers[0].self_attn
        assert attention.qkv_weight.data_ptr() == attention.q_proj.weight.data_ptr()
        after = model.state_dict()
        assert after.keys() == before.keys()
        assert all(torch.equal(before[k], after[k]) for k in before)
    finally:
        enable_custom_ops(model, False)


def test_buckets_cover_max_slots():
    from voxcpm_triton.engine.cuda_graphs import BUCKETS, buckets_for

    assert buckets_for(1) == (1,)
    assert buckets_for(12) == (1, 2, 4, 8, 16)
    assert buckets_for(64) == (1, 2, 4, 8, 16, 32, 64)
    assert buckets_for(256) == BUCKETS
    assert buckets_for(300) == BUCKETS + (512,)
    assert buckets_for(1500) == BUCKETS + (512, 1024, 2048)


def test_noise_ring_draws_a_block_per_stream():
    """A stream's k-th patch is the k-th [D, P] draw of a block drawn in one call from its own
    generator, whatever the step the block was drawn at."""
    from voxcpm_triton.engine.noise import NoiseRing

    ring = NoiseRing(max_slots=2, patch_size=4, feat_dim=8, block=3, device=torch.device("cpu"), dtype=torch.float32)
    generator = torch.Generator().manual_seed(5)
    expected = torch.randn((3, 8, 4), generator=torch.Generator().manual_seed(5))
    seen = []
    generators = [None, generator]
    for launched in range(3):
        rows = ring.rows(np.array([1]), np.array([launched]), generators)
        seen.append(ring.ring[1, int(rows[0])].T)  # what ops.step_gather reads for the stream
    assert all(torch.equal(seen[k], expected[k].T) for k in range(3))
    ring.rows(np.array([1]), np.array([3]), generators)  # the next block comes from the same generator
    assert not torch.equal(ring.ring[1], expected)
    assert not ring.ring[0].any()  # the other slot's generator was never asked
