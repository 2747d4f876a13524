"""The fused flow-matching loop builds its time tokens and step sizes once per (timesteps, batch,
dtype, device) and rebuilds them when a time MLP's weight changes (FlowMatching._constants)."""

from __future__ import annotations

import pytest
import torch

from tests.cpu.tiny_reference import tiny_config_dict
from voxcpm_triton.config import parse_config
from voxcpm_triton.model.fast_path import enable_custom_ops
from voxcpm_triton.model.voxcpm import build_model


@pytest.fixture(params=["voxcpm2", "voxcpm0.5b"])
def sampler(request, monkeypatch):
    torch.manual_seed(3)
    model = build_model(parse_config(tiny_config_dict(request.param))).eval()
    enable_custom_ops(model, True)
    flow = model.feat_decoder
    calls = []
    time_token = flow.estimator.time_token
    monkeypatch.setattr(flow.estimator, "time_token", lambda *args: calls.append(args) or time_token(*args))
    return model.config, flow, calls


def sample(config, flow, batch: int, timesteps: int = 6) -> torch.Tensor:
    gen = torch.Generator().manual_seed(batch)
    mu_width = 2 * config.dit.hidden_dim if config.is_v2 else config.dit.hidden_dim
    noise = torch.randn(batch, config.patch_size, config.feat_dim, generator=gen)
    mu = torch.randn(batch, mu_width, generator=gen)
    cond = torch.randn(batch, config.patch_size, config.feat_dim, generator=gen)
    return flow.sample(noise, mu, cond, timesteps, torch.full((batch,), 2.0))


@torch.inference_mode()
def test_time_tokens_are_built_once_per_batch_and_timesteps(sampler):
    config, flow, calls = sampler
    first = sample(config, flow, 2)
    assert torch.equal(sample(config, flow, 2), first)
    assert len(calls) == 1
    sample(config, flow, 3)
    sample(config, flow, 2, timesteps=4)
    assert len(calls) == 3


def test_a_changed_time_mlp_weight_rebuilds_them(sampler):
    config, flow, calls = sampler
    with torch.inference_mode():
        before = sample(config, flow, 2)
    with torch.no_grad():
        flow.estimator.delta_time_mlp.linear_2.bias.add_(0.5)
    with torch.inference_mode():
        after = sample(config, flow, 2)
        flow._euler_constants.clear()
        rebuilt = sample(config, flow, 2)
    assert len(calls) == 3
    assert torch.equal(after, rebuilt)
    assert not torch.equal(after, before)
