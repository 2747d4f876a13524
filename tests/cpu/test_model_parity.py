"""Module parity with the reference `voxcpm` classes on tiny in-memory weights (fp32).

Each test builds the reference model, copies its state_dict into ours (strict) and compares one
module's outputs on the same inputs.
"""

from __future__ import annotations

import pytest
import torch

from tests.cpu.tiny_reference import build_reference_model, model_state, tiny_config_dict
from tests.reference_shim import import_reference
from voxcpm_triton.config import parse_config
from voxcpm_triton.model.attention import DecodeSlots
from voxcpm_triton.model.voxcpm import build_model

pytestmark = pytest.mark.skipif(import_reference() is None, reason="reference voxcpm not installed")

TOLERANCE = 1e-4  # fp32 max abs error
VARIANTS = ["voxcpm2", "voxcpm1.5", "voxcpm0.5b"]


@pytest.fixture(scope="module", params=VARIANTS)
def pair(request):
    raw = tiny_config_dict(request.param)
    reference = build_reference_model(raw, seed=1)
    ours = build_model(parse_config(raw)).eval()
    ours.load_state_dict(model_state(reference), strict=True)
    return reference, ours


def max_err(a: torch.Tensor, b: torch.Tensor) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return (a - b).abs().max().item()


@torch.inference_mode()
@pytest.mark.parametrize("stack", ["base_lm", "residual_lm"])
def test_lm_hidden_states(pair, stack):
    reference, ours = pair
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(2, 13, ours.config.lm.hidden_size, generator=gen)
    ref_out, ref_kv = getattr(reference, stack)(inputs_embeds=x, is_causal=True)
    our_out, our_kv = getattr(ours, stack)(x, causal=True)
    assert max_err(ref_out, our_out) <= TOLERANCE
    assert max_err(ref_kv[-1][0], our_kv[-1][0]) <= TOLERANCE  # rotated keys
    # The residual LM of VoxCPM2 runs without RoPE; VoxCPM1.x keeps it.
    assert (getattr(ours, stack).rope is None) == (stack == "residual_lm" and ours.config.is_v2)


@torch.inference_mode()
@pytest.mark.parametrize("stack", ["base_lm", "residual_lm"])
def test_lm_decode_step_matches_reference_forward_step(pair, stack):
    reference, ours = pair
    ref_lm, our_lm = getattr(reference, stack), getattr(ours, stack)
    cfg = our_lm.config
    gen = torch.Generator().manual_seed(4)
    prompt = torch.randn(1, 9, cfg.hidden_size, generator=gen)
    steps = torch.randn(3, 1, cfg.hidden_size, generator=gen)
    _, kv = ref_lm(inputs_embeds=prompt, is_causal=True)
    ref_lm.kv_cache.fill_caches(kv)
    # Our cache holds 3 slots; the stream lives in slot 2 and the other slots hold garbage that
    # must not leak into its attention.
    shape = (cfg.num_hidden_layers, 3, cfg.num_key_value_heads, 32, cfg.head_dim)
    k_cache, v_cache = torch.randn(shape, generator=gen), torch.randn(shape, generator=gen)
    _, our_kv = our_lm(prompt, causal=True)
    for layer, (k, v) in enumerate(our_kv):
        k_cache[layer, 2, :, :9], v_cache[layer, 2, :, :9] = k[0], v[0]
    for i, x in enumerate(steps):
        position = 9 + i
        ref_h = ref_lm.forward_step(x, torch.tensor([ref_lm.kv_cache.step()]))
        where = DecodeSlots(torch.tensor([2]), torch.tensor([position]), span=position + 1)
        our_h = our_lm.decode(x, k_cache, v_cache, where)
        assert max_err(ref_h, our_h) <= TOLERANCE


@torch.inference_mode()
def test_local_encoder(pair):
    reference, ours = pair
    cfg = ours.config
    patches = torch.randn(2, 5, cfg.patch_size, cfg.feat_dim, generator=torch.Generator().manual_seed(5))
    assert max_err(reference.feat_encoder(patches), ours.feat_encoder(patches)) <= TOLERANCE
    ref_embed = reference.enc_to_lm_proj(reference.feat_encoder(patches))
    assert max_err(ref_embed, ours.embed_patches(patches)) <= TOLERANCE


@torch.inference_mode()
def test_local_dit_velocity(pair):
    reference, ours = pair
    cfg = ours.config
    gen = torch.Generator().manual_seed(6)
    n = 3
    mu_width = 2 * cfg.dit.hidden_dim if cfg.is_v2 else cfg.dit.hidden_dim
    x = torch.randn(n, cfg.feat_dim, cfg.patch_size, generator=gen)  # reference layout [N, D, P]
    cond = torch.randn(n, cfg.feat_dim, cfg.patch_size, generator=gen)
    mu = torch.randn(n, mu_width, generator=gen)
    t = torch.rand(n, generator=gen)
    dt = torch.rand(n, generator=gen)
    ref_v = reference.feat_decoder.estimator(x, mu, t, cond, dt)
    our_v = ours.feat_decoder.estimator(x.transpose(1, 2), mu, t, cond.transpose(1, 2), dt)
    assert max_err(ref_v, our_v.transpose(1, 2)) <= TOLERANCE


@torch.inference_mode()
def test_fsq_and_stop_head(pair):
    reference, ours = pair
    h = torch.randn(4, 7, ours.config.lm.hidden_size, generator=torch.Generator().manual_seed(7))
    assert max_err(reference.fsq_layer(h), ours.fsq_layer(h)) <= TOLERANCE
    ref_stop = reference.stop_head(reference.stop_actn(reference.stop_proj(h)))
    assert max_err(ref_stop, ours.stop_logits(h)) <= TOLERANCE


@torch.inference_mode()
@pytest.mark.parametrize("timesteps,cfg_value", [(10, 2.0), (4, 1.5)])
def test_cfm_euler_sampler_with_cfg_zero_star(pair, timesteps, cfg_value):
    reference, ours = pair
    cfg = ours.config
    gen = torch.Generator().manual_seed(8)
    n = 2
    mu_width = 2 * cfg.dit.hidden_dim if cfg.is_v2 else cfg.dit.hidden_dim
    mu = torch.randn(n, mu_width, generator=gen)
    cond = torch.randn(n, cfg.feat_dim, cfg.patch_size, generator=gen)
    torch.manual_seed(11)
    ref_patch = reference.feat_decoder(mu=mu, n_timesteps=timesteps, patch_size=cfg.patch_size,
                                       cond=cond, cfg_value=cfg_value)
    # The reference draws its noise [N, D, P] from the global generator; draw the same numbers.
    noise = torch.randn(n, cfg.feat_dim, cfg.patch_size, generator=torch.Generator().manual_seed(11))
    our_patch = ours.feat_decoder.sample(noise.transpose(1, 2), mu, cond.transpose(1, 2), timesteps,
                                         torch.full((n,), cfg_value))
    assert max_err(ref_patch, our_patch.transpose(1, 2)) <= TOLERANCE
    assert max_err(ref_patch, noise) > 1e-2  # the sampler did move the noise


@torch.inference_mode()
def test_prefill_matches_reference_sequence_pass(pair):
    """Base LM + FSQ mix + residual LM over a mixed text/audio prompt, as the reference prefill."""
    reference, ours = pair
    cfg = ours.config
    gen = torch.Generator().manual_seed(9)
    t = 11
    tokens = torch.randint(0, cfg.lm.vocab_size, (1, t), generator=gen)
    audio_mask = torch.zeros(1, t, dtype=torch.int32)
    audio_mask[0, 7:] = 1
    text_mask = 1 - audio_mask
    feats = torch.randn(1, t, cfg.patch_size, cfg.feat_dim, generator=gen) * audio_mask[..., None, None]
    out = ours.prefill(tokens, feats, text_mask, audio_mask)

    feat_embed = reference.enc_to_lm_proj(reference.feat_encoder(feats))
    scale = cfg.lm.scale_emb if cfg.lm.use_mup else 1.0
    embed = text_mask[..., None] * reference.base_lm.embed_tokens(tokens) * scale + audio_mask[..., None] * feat_embed
    enc, _ = reference.base_lm(inputs_embeds=embed, is_causal=True)
    enc = reference.fsq_layer(enc) * audio_mask[..., None] + enc * text_mask[..., None]
    if cfg.is_v2:
        res_in = reference.fusion_concat_proj(torch.cat((enc, audio_mask[..., None] * feat_embed), dim=-1))
    else:
        res_in = enc + audio_mask[..., None] * feat_embed
    res, _ = reference.residual_lm(inputs_embeds=res_in, is_causal=True)
    assert max_err(enc, out.lm_hidden) <= TOLERANCE
    assert max_err(res, out.residual_hidden) <= TOLERANCE
