"""AudioVAE v1/v2 against the reference classes with the same (random) weights: encode and decode,
fp32, max abs error <= 1e-4; weight-norm folding changes nothing."""

from __future__ import annotations

import pytest
import torch

from tests.reference_shim import import_reference
from voxcpm_triton.audio.audio_vae import build_audio_vae

TOLERANCE = 1e-4

CASES = {
    "v1-depthwise": ("voxcpm", dict(encoder_dim=8, encoder_rates=[2, 5], latent_dim=16, decoder_dim=32,
                                    decoder_rates=[5, 2], depthwise=True, sample_rate=16000)),
    "v1-dense": ("voxcpm", dict(encoder_dim=4, encoder_rates=[3, 2], latent_dim=8, decoder_dim=16,
                                decoder_rates=[3, 2], depthwise=False, sample_rate=16000)),
    "v2-scale-bias": ("voxcpm2", dict(encoder_dim=8, encoder_rates=[2, 5], latent_dim=16, decoder_dim=32,
                                      decoder_rates=[5, 2, 3], sample_rate=16000, out_sample_rate=48000,
                                      sr_bin_boundaries=[20000, 30000, 40000])),
    "v2-concat-outlayer": ("voxcpm2", dict(encoder_dim=4, encoder_rates=[5, 2], latent_dim=8, decoder_dim=16,
                                           decoder_rates=[3, 2, 5], sample_rate=16000, out_sample_rate=48000,
                                           sr_bin_boundaries=[20000, 40000], cond_type="concat", cond_dim=4,
                                           cond_out_layer=True, depthwise=False)),
    "v2-no-sr-cond": ("voxcpm2", dict(encoder_dim=4, encoder_rates=[2, 2], latent_dim=8, decoder_dim=16,
                                      decoder_rates=[2, 3], sample_rate=16000, out_sample_rate=24000,
                                      sr_bin_boundaries=None)),
}


def _reference_vae(architecture: str, cfg: dict) -> torch.nn.Module:
    if import_reference() is None:
        pytest.skip("reference voxcpm package not installed")
    from voxcpm.modules import audiovae

    if architecture == "voxcpm2":
        return audiovae.AudioVAEV2(audiovae.AudioVAEConfigV2(**cfg)).eval()
    return audiovae.AudioVAE(audiovae.AudioVAEConfig(**cfg)).eval()


def _randomise(module: torch.nn.Module, seed: int) -> None:
    # Default init leaves scale/bias embeddings at 1/0 and alpha at 1: spread them so a wrong
    # index or formula shows up.
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in module.state_dict().items():
            if not tensor.is_floating_point():
                continue
            if name.endswith("alpha"):
                tensor.copy_(torch.rand(tensor.shape, generator=generator) + 0.5)
            else:
                tensor.copy_(torch.randn(tensor.shape, generator=generator) * 0.3)


@pytest.mark.reference
@pytest.mark.parametrize("case", sorted(CASES))
def test_audio_vae_matches_reference(case: str) -> None:
    architecture, cfg = CASES[case]
    reference = _reference_vae(architecture, cfg)
    _randomise(reference, seed=1)
    ours = build_audio_vae(cfg, architecture)
    reference_state = reference.state_dict()
    assert set(ours.state_dict()) == set(reference_state)
    ours.load_state_dict(reference_state)

    batch = 1 if cfg.get("cond_type") == "concat" else 2  # the reference's concat path only takes batch 1
    audio = torch.randn(batch, 997, generator=torch.Generator().manual_seed(2)) * 0.5  # not a whole frame
    with torch.no_grad():
        z_ref = reference.encode(audio, cfg["sample_rate"])
        z_ours = ours.encode(audio)
        assert z_ours.shape == z_ref.shape
        encode_error = (z_ours - z_ref).abs().max().item()

        latents = torch.randn(z_ref.shape, generator=torch.Generator().manual_seed(3))
        audio_ref = reference.decode(latents)
        audio_ours = ours.decode(latents)
        assert audio_ours.shape == audio_ref.shape == (batch, 1, latents.shape[-1] * ours.decode_hop_length)
        decode_error = (audio_ours - audio_ref).abs().max().item()

        ours.fold_weight_norm()
        folded_error = (ours.decode(latents) - audio_ref).abs().max().item()
        folded_encode_error = (ours.encode(audio) - z_ref).abs().max().item()

    assert audio_ref.abs().mean() > 1e-3  # non-degenerate output
    assert encode_error <= TOLERANCE, encode_error
    assert decode_error <= TOLERANCE, decode_error
    assert folded_error <= TOLERANCE, folded_error
    assert folded_encode_error <= TOLERANCE, folded_encode_error
    assert not any(name.endswith(("weight_g", "weight_v")) for name in ours.state_dict())


@pytest.mark.reference
def test_v2_output_rate_selects_condition_bucket() -> None:
    architecture, cfg = CASES["v2-scale-bias"]
    reference = _reference_vae(architecture, cfg)
    _randomise(reference, seed=4)
    ours = build_audio_vae(cfg, architecture)
    ours.load_state_dict(reference.state_dict())
    latents = torch.randn(1, 16, 5, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        for rate in (16000, 24000, 44100):
            expected = reference.decode(latents, torch.tensor([rate], dtype=torch.int32))
            assert (ours.decode(latents, rate) - expected).abs().max().item() <= TOLERANCE
        assert (ours.decode(latents, 16000) - ours.decode(latents, 44100)).abs().max() > 1e-3


def test_noise_block_is_rejected() -> None:
    with pytest.raises(ValueError, match="use_noise_block"):
        build_audio_vae({"use_noise_block": True}, "voxcpm")
