"""The opt-in FP8 mode on the model (CPU, the ops' references): only the LocDiT's GEMMs get FP8
copies, turning it off (or keeping the rows below min_rows) leaves the bf16/fp32 path bit for bit,
turned on the LocDiT's velocity stays within FP8 accuracy, and VOXCPM_FP8 switches the runner."""

from __future__ import annotations

import pytest
import torch

from tests.cpu.test_engine_batching import tiny_model
from voxcpm_triton.engine.runner import ModelRunner
from voxcpm_triton.model.fast_path import enable_custom_ops, enable_fp8, fp8_min_rows
from voxcpm_triton.model.attention import Attention
from voxcpm_triton.model.mlp import MLP

ROWS_PER_SEQUENCE = 11  # tiny VoxCPM2 LocDiT: 2 mu tokens, time, 4 condition and 4 noisy positions


def dit_inputs(model, sequences: int):
    dit = model.feat_decoder.estimator
    config = model.config
    g = torch.Generator().manual_seed(0)
    return (torch.randn(sequences, config.patch_size, config.feat_dim, generator=g),
            torch.randn(sequences, 2 * dit.hidden_size, generator=g), torch.rand(sequences, generator=g),
            torch.randn(sequences, config.patch_size, config.feat_dim, generator=g), torch.full((sequences,), 0.1))


@pytest.fixture
def model():
    built = tiny_model("voxcpm2")
    enable_custom_ops(built, True)
    yield built
    enable_fp8(built, False)
    enable_custom_ops(built, False)


def fp8_modules(model) -> set[str]:
    return {name for name, module in model.named_modules()
            if isinstance(module, Attention) and module.fp8_qkv is not None
            or isinstance(module, MLP) and module.fp8_gate_up is not None}


@torch.no_grad()
def test_only_the_locdit_gets_fp8_weights_and_state_dict_is_unchanged(model):
    keys = list(model.state_dict())
    held = enable_fp8(model, True, min_rows=1)
    touched = fp8_modules(model)
    dit_layers = len(model.feat_decoder.estimator.decoder.layers)
    assert len(touched) == 2 * dit_layers and all(name.startswith("feat_decoder.estimator.") for name in touched)
    assert held > 0 and list(model.state_dict()) == keys
    enable_fp8(model, False)
    assert not fp8_modules(model)


@torch.no_grad()
def test_disabled_or_below_min_rows_is_bit_identical(model):
    dit = model.feat_decoder.estimator
    inputs = dit_inputs(model, 6)
    before = dit(*inputs)
    enable_fp8(model, True, min_rows=6 * ROWS_PER_SEQUENCE + 1)  # every GEMM has fewer rows
    assert torch.equal(dit(*inputs), before)
    enable_fp8(model, True, min_rows=6 * ROWS_PER_SEQUENCE)  # the whole-sequence GEMMs take FP8
    assert not torch.equal(dit(*inputs), before)
    enable_fp8(model, False)
    assert torch.equal(dit(*inputs), before)


@torch.no_grad()
def test_fp8_velocity_close_to_full_precision(model):
    dit = model.feat_decoder.estimator
    inputs = dit_inputs(model, 6)
    exact = dit(*inputs)
    enable_fp8(model, True, min_rows=1)
    approx = dit(*inputs)
    # Measured on this tiny model: ~2% of the output's spread (two e4m3 roundings per product,
    # through 2 layers); a broken scale or layout gives errors of the order of the output itself.
    assert (approx - exact).pow(2).mean().sqrt() < 0.06 * exact.pow(2).mean().sqrt()


def test_runner_follows_voxcpm_fp8(monkeypatch):
    built = tiny_model("voxcpm2")
    try:
        monkeypatch.setenv("VOXCPM_FP8", "1")
        runner = ModelRunner(built, 2, 64, torch.device("cpu"), fixed_shape=True, custom_ops=True)
        assert runner.fp8 and fp8_modules(built)
        ModelRunner(built, 2, 64, torch.device("cpu"), fixed_shape=True, custom_ops=False)
        assert not fp8_modules(built)  # FP8 rides on the custom-ops path only
        monkeypatch.setenv("VOXCPM_FP8", "0")
        runner = ModelRunner(built, 2, 64, torch.device("cpu"), fixed_shape=True, custom_ops=True)
        assert not runner.fp8 and not fp8_modules(built)
    finally:
        enable_fp8(built, False)
        enable_custom_ops(built, False)


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_min_rows_environment_is_validated(monkeypatch, value):
    monkeypatch.setenv("VOXCPM_FP8_MIN_ROWS", value)
    with pytest.raises(ValueError, match="VOXCPM_FP8_MIN_ROWS"):
        fp8_min_rows()
