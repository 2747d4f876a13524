"""Nano-vLLM-VoxCPM's own model code running on the flash-attn stand-in (CPU): its whole prefill
(ragged LM attention, LocEnc and LocDiT) stays finite, and one decode step over the paged KV cache
equals a prefill of the whole sequence. Skipped where nano-vllm-voxcpm (and triton, which its
attention module imports) is not installed, e.g. in CI; the device bundle brings both to the H200."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

STANDIN = Path(__file__).resolve().parents[2] / "perf" / "baselines" / "flash_attn_standin"


@pytest.fixture(scope="module")
def nano(tmp_path_factory):
    sys.path.insert(0, str(STANDIN))
    try:
        pytest.importorskip("triton")
        attention = pytest.importorskip("nanovllm_voxcpm.layers.attention")
        from nanovllm_voxcpm.models.voxcpm2.config import VoxCPM2Config
        from nanovllm_voxcpm.models.voxcpm2.model import VoxCPM2Model
        from nanovllm_voxcpm.utils.loader import load_model

        from voxcpm_triton.checkpoint.make import make_checkpoint

        folder = make_checkpoint(tmp_path_factory.mktemp("ckpt") / "tiny", "voxcpm2", size="tiny")
        config = VoxCPM2Config.model_validate_json((folder / "config.json").read_text())
        model = VoxCPM2Model(config, 10).eval()
        load_model(model, str(folder))
        yield attention, config, model
    finally:
        sys.path.remove(str(STANDIN))


def test_prefill_runs_on_the_standin(nano):
    from nanovllm_voxcpm.utils.context import set_context

    _, config, model = nano
    lengths = [5, 8]
    cu = torch.tensor([0, 5, 13], dtype=torch.int32)
    set_context(True, cu, cu, 8, 8, torch.empty(0, dtype=torch.int32), None, None)
    mask = torch.zeros(13, dtype=torch.bool)
    mask[[3, 10]] = True
    with torch.no_grad():
        out = model(positions=torch.cat([torch.arange(n) for n in lengths]), text_tokens=torch.randint(0, 200, (13,)),
                    feat=torch.randn(13, config.patch_size, config.feat_dim), feat_mask=mask,
                    temperature=torch.ones(2), cfg_value=torch.full((2,), 2.0),
                    z_noise=torch.randn(2, config.feat_dim, config.patch_size))
    assert out["latents"].shape == (2, config.patch_size, config.feat_dim)
    assert torch.isfinite(out["latents"]).all()


def test_paged_decode_equals_full_prefill(nano, monkeypatch):
    from nanovllm_voxcpm.utils.context import set_context

    attention, config, model = nano

    def store_kvcache(key, value, k_cache, v_cache, slot_mapping):  # nano's Triton kernel, in torch
        k_cache.view(-1, *k_cache.shape[2:])[slot_mapping.long()] = key
        v_cache.view(-1, *v_cache.shape[2:])[slot_mapping.long()] = value

    monkeypatch.setattr(attention, "store_kvcache", store_kvcache)
    lm = model.base_lm
    block, pages = 4, 16
    layers = [m for m in lm.modules() if isinstance(m, attention.Attention) and m.is_causal]
    lengths = [5, 9]
    tables = [[7, 2], [0, 11, 5]]
    embeds = [torch.randn(n + 1, config.lm_config.hidden_size) for n in lengths]

    def slots(i, positions):
        return [tables[i][p // block] * block + p % block for p in positions]

    with torch.no_grad():
        full = []
        for e in embeds:  # no cache: plain ragged prefill of the whole sequence
            for m in layers:
                m.k_cache = m.v_cache = torch.tensor([])
            cu = torch.tensor([0, len(e)], dtype=torch.int32)
            set_context(True, cu, cu, len(e), len(e), None, None, None)
            full.append(lm(e, torch.arange(len(e)))[-1])
        for m in layers:
            m.k_cache = torch.zeros(pages, block, m.num_kv_heads, m.head_dim)
            m.v_cache = torch.zeros(pages, block, m.num_kv_heads, m.head_dim)
        cu = torch.tensor([0, lengths[0], sum(lengths)], dtype=torch.int32)
        mapping = torch.tensor(slots(0, range(lengths[0])) + slots(1, range(lengths[1])), dtype=torch.int32)
        set_context(True, cu, cu, max(lengths), max(lengths), mapping, None, None)
        lm(torch.cat([e[:-1] for e in embeds]), torch.cat([torch.arange(n) for n in lengths]))
        table = torch.tensor([t + [-1] * (4 - len(t)) for t in tables], dtype=torch.int32)  # graph-width table
        set_context(False, slot_mapping=torch.tensor(slots(0, [5]) + slots(1, [9]), dtype=torch.int32),
                    context_lens=torch.tensor([6, 10], dtype=torch.int32), block_tables=table)
        step = lm(torch.stack([e[-1] for e in embeds]), torch.tensor(lengths))
    for i in range(2):
        torch.testing.assert_close(step[i], full[i], atol=1e-5, rtol=1e-5)
