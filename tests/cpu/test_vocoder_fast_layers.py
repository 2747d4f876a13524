"""The vocoder's fast layers (the CUDA default), forced on the CPU in float32 where their logic is
device-independent: each layer equals its plain form, the windowed decode through them equals the
plain trimmed decode for full and short windows, and at the released VoxCPM2 shapes every residual
unit runs in a contiguous buffer whose length is a multiple of ALIGN_SAMPLES."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.cpu.tiny_vae import VAES, tiny_vae
from voxcpm_triton.audio.audio_vae import build_audio_vae
from voxcpm_triton.audio.vae_layers import (
    BIAS_CHANNELS,
    CausalConv1d,
    CausalConvTranspose1d,
    DecoderBlock,
    ResidualUnit,
    SampleRateCondition,
)
from voxcpm_triton.audio.vocoder import ALIGN_SAMPLES, WindowedVocoder, fast_layers_requested
from voxcpm_triton.checkpoint.make import config_dict

TOLERANCE = 1e-5


def _randomize(module: torch.nn.Module) -> torch.nn.Module:
    torch.manual_seed(1)
    with torch.no_grad():
        for param in module.parameters():
            param.normal_(0, 0.3)
    return module.eval()


@pytest.mark.parametrize("with_bias", (True, False))
def test_add_pointwise_equals_residual_plus_conv(with_bias: bool) -> None:
    conv = _randomize(CausalConv1d(6, 6, kernel_size=1, left_pad=0, bias=with_bias))
    base = torch.randn(3, 6, 20)
    residual = base[..., 4:]  # a trimmed view, as the decoder hands over
    x = torch.randn(3, 6, 16)
    kept = residual.clone()
    out = conv.add_pointwise(residual, x)
    assert torch.allclose(out, residual + conv(x), atol=1e-6)
    assert out.is_contiguous() and torch.equal(residual, kept)  # the residual is not written


def test_add_pointwise_refuses_other_convs() -> None:
    with pytest.raises(ValueError, match="1x1 conv"):
        CausalConv1d(4, 4, kernel_size=7, left_pad=6).add_pointwise(torch.zeros(1, 4, 8), torch.zeros(1, 4, 8))


def test_unpadded_conv_is_the_tail_of_the_padded_one() -> None:
    conv = _randomize(CausalConv1d(4, 5, kernel_size=7, left_pad=12, dilation=2))
    x = torch.randn(2, 4, 40)
    assert torch.allclose(conv.forward_unpadded(x), conv(x)[..., 12:], atol=1e-6)


def test_mono_conv_as_gemm_equals_the_conv() -> None:
    conv = _randomize(CausalConv1d(6, 1, kernel_size=7, left_pad=12, dilation=2))
    x = torch.randn(3, 6, 50)
    out = conv.forward_unpadded_mono(x)
    assert out.dtype == torch.float32 and out.shape == (3, 1, 38)
    assert torch.allclose(out, conv.forward_unpadded(x), atol=1e-5)
    with pytest.raises(ValueError, match="one output channel"):
        _randomize(CausalConv1d(6, 2, kernel_size=7, left_pad=6)).forward_unpadded_mono(x)


def test_fast_transposed_conv_is_contiguous_and_equal() -> None:
    conv = _randomize(CausalConvTranspose1d(6, 4, stride=3, right_trim=3))
    x = torch.randn(2, 6, 11)
    plain = conv(x)
    conv.fast_path = True
    fast = conv(x)
    assert not plain.is_contiguous() and fast.is_contiguous()
    assert fast.shape == plain.shape == (2, 4, 33) and torch.allclose(fast, plain, atol=1e-6)


def test_fast_residual_unit_and_condition_equal_plain() -> None:
    unit = _randomize(ResidualUnit(8, dilation=3, groups=8))
    condition = _randomize(SampleRateCondition(8, buckets=4, cond_type="scale_bias", cond_dim=4, out_layer=False))
    x = torch.randn(2, 8, 40)[..., 5:]
    bucket = torch.tensor([1, 3])
    plain = unit(x), condition(x, bucket)
    unit.fast_path = condition.fast_path = True
    fast = unit(x), condition(x, bucket)
    for a, b in zip(plain, fast):
        assert b.is_contiguous() and torch.allclose(a, b, atol=1e-5)


def test_accumulate_adds_the_unit_output_and_keeps_the_extra_channels_zero() -> None:
    unit = _randomize(ResidualUnit(8, dilation=3, groups=8))
    unit.build_bias_channel()
    x = torch.randn(2, 8, 40)
    buffer = torch.cat([x, torch.zeros(2, BIAS_CHANNELS, 40)], dim=1)
    unit.accumulate_(buffer)
    assert torch.allclose(buffer[:, :8], unit(x), atol=1e-5)
    assert torch.equal(buffer[:, 8:], torch.zeros(2, BIAS_CHANNELS, 40))


def test_bias_channel_only_for_depthwise_units() -> None:
    unit = ResidualUnit(8, dilation=1, groups=1)
    unit.build_bias_channel()
    assert unit.bias_channel is None
    with pytest.raises(RuntimeError, match="build_bias_channel"):
        unit.accumulate_(torch.zeros(1, 8 + BIAS_CHANNELS, 16))


@pytest.mark.parametrize("groups", (8, 1))
def test_fast_decoder_block_equals_plain(groups: int) -> None:
    block = _randomize(DecoderBlock(12, 8, stride=3, groups=groups))
    x = torch.randn(2, 12, 15)[..., 3:]
    plain = block(x)
    block.fast_path = True
    for module in block.modules():
        if isinstance(module, (ResidualUnit, CausalConvTranspose1d)):
            module.fast_path = True
        if isinstance(module, ResidualUnit):
            module.build_bias_channel()
    with torch.inference_mode():  # as the vocoder runs it
        fast = block(x)
    assert fast.shape == plain.shape == (2, 8, 36) and torch.allclose(fast, plain, atol=1e-5)


@pytest.mark.parametrize("name", sorted(VAES))
def test_fast_windowed_decode_equals_plain(name: str) -> None:
    vae, patch_size = tiny_vae(name, random_biases=True)
    plain = WindowedVocoder(vae, patch_size, trim=True)
    fast = WindowedVocoder(vae, patch_size, trim=True, fast_layers=True)
    assert not plain.fast_layers and fast.decoder is not vae.decoder
    # The fixed output rate's conditions are precomputed scale/shift pairs (random embeddings here).
    assert len(fast._affines) == (len(vae.decoder.sr_cond_model) if name == "v2" else 0)
    assert not any(getattr(m, "fast_path", False) for m in vae.modules())  # the shared VAE stays plain
    rng = np.random.default_rng(5)
    windows = [rng.standard_normal((n, patch_size, 8)).astype(np.float32)
               for n in range(1, plain.window_patches + 1)]
    for a, b in zip(plain.decode(windows), fast.decode(windows)):
        assert b.dtype == np.float32 and a.shape == b.shape == (plain.samples_per_patch,)
        assert np.abs(a - b).max() <= TOLERANCE


def test_bfloat16_fast_layers_stay_close_to_float32() -> None:
    # The GPU tier checks the real shapes against the vocoder's bf16 bound; this pins the CPU run of
    # the same layers (bias channel, GEMM final conv) to it: measured 0.44% relative RMS at full size.
    vae, patch_size = tiny_vae("v2", random_biases=True)
    reference = WindowedVocoder(vae, patch_size, trim=True)
    fast = WindowedVocoder(vae, patch_size, dtype=torch.bfloat16, trim=True, fast_layers=True)
    rng = np.random.default_rng(6)
    windows = [rng.standard_normal((fast.window_patches, patch_size, 8)).astype(np.float32) for _ in range(3)]
    expected = np.concatenate(reference.decode(windows))
    audio = np.concatenate(fast.decode(windows))
    assert np.sqrt(np.mean((audio - expected) ** 2)) / np.sqrt(np.mean(expected**2)) <= 2e-2
    assert np.abs(audio - expected).max() <= 1e-2


def test_released_shapes_feed_aligned_contiguous_activations() -> None:
    config = config_dict("voxcpm2", "full")
    vae = build_audio_vae(config["audio_vae_config"], "voxcpm2").fold_weight_norm().eval()
    vocoder = WindowedVocoder(vae, 4, fast_layers=True)
    buffers: list[torch.Tensor] = []
    units = [m for m in vocoder.decoder.modules() if isinstance(m, ResidualUnit)]
    for unit in units:
        unit.accumulate_ = lambda buffer, run=unit.accumulate_: buffers.append(buffer) or run(buffer)
    with torch.inference_mode():
        audio = vocoder._decode_trimmed(torch.randn(1, 64, vocoder.window_patches * 4))
    for unit in units:
        del unit.accumulate_
    assert audio.shape == (1, vocoder.samples_per_patch) and audio.dtype == torch.float32
    assert len(buffers) == 18
    assert all(x.is_contiguous() and x.shape[-1] % ALIGN_SAMPLES == 0 for x in buffers), \
        [(tuple(x.shape), x.stride()) for x in buffers]


def test_fast_layers_default_off_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    # The CPU path (parity with the official package) never takes the fast branches.
    vae, patch_size = tiny_vae("v2", random_biases=True)
    vocoder = WindowedVocoder(vae, patch_size)
    assert not vocoder.fast_layers and vocoder.decoder is vae.decoder
    assert not any(getattr(m, "fast_path", False) for m in vae.modules())
    monkeypatch.setenv("VOXCPM_VOCODER_FAST_LAYERS", "0")
    assert not fast_layers_requested()
    monkeypatch.setenv("VOXCPM_VOCODER_FAST_LAYERS", "1")
    assert fast_layers_requested()

