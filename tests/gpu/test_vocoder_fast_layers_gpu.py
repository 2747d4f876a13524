"""The vocoder's fast layers (the CUDA default: 1x1 conv + bias + skip as one batched GEMM,
contiguous 8-sample-aligned activations, unpadded causal convs, float32 cast in the graph, pinned
host staging) on the full-size VoxCPM2 decoder (random weights, TF32 off): float32 equals the plain
layers to the vocoder's float32 tolerance, graphed or eager and at 256 windows; bfloat16, with and
without the fused CUDA ops, stays within the vocoder's bf16 bound of float32 audio; every residual
unit runs in a contiguous, 16-byte-aligned buffer, with its second Snake fused into the depthwise conv
kernel (no separate Snake pass); returned chunks survive the next call."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from tests.gpu.vocoder_checks import (BF16_MAX_ABS, BF16_RELATIVE_RMS, FP32_TOLERANCE, PATCH_SIZE, audio_errors,
                                      full_windows, patches, stream_windows)
from voxcpm_triton import ops
from voxcpm_triton.audio.audio_vae import AudioVAE
from voxcpm_triton.audio.vae_layers import BIAS_CHANNELS, CausalConv1d, ResidualUnit, Snake1d
from voxcpm_triton.audio.vocoder import ALIGN_SAMPLES, WindowedVocoder
from voxcpm_triton.ops import library

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.usefixtures("no_tf32"),
]

def test_bfloat16_mono_conv_gemm_within_one_rounding_per_tap() -> None:
    # The decoder's last conv (32 -> 1 channel, kernel 7) as a GEMM over its taps: each tap's channel
    # sum is rounded to bf16 once before the float32 sum, so |error| <= 2^-8 * sum_k |tap_k| (+ fp32).
    generator = torch.Generator(device="cuda").manual_seed(0)
    layer = CausalConv1d(32, 1, kernel_size=7, left_pad=6)
    layer.fold()
    with torch.no_grad():
        layer.weight.copy_(torch.randn(1, 32, 7, generator=generator, device="cuda").cpu() * 0.2)
        layer.bias.fill_(0.1)
    layer = layer.to("cuda", torch.bfloat16)
    x = torch.randn(4, 32, 7688, generator=generator, device="cuda").to(torch.bfloat16)
    with torch.inference_mode():
        out = layer.forward_unpadded_mono(x)
        exact = torch.nn.functional.conv1d(x.float(), layer.weight.float(), layer.bias.float())
        taps = torch.nn.functional.conv1d(x.float(), layer.weight.float().permute(2, 1, 0))  # [B, 7, T]: each tap's sum
    assert out.dtype == torch.float32 and out.shape == exact.shape == (4, 1, 7682)
    magnitude = sum(taps[:, k:k + 1, k:k + 7682].abs() for k in range(7))
    assert ((out - exact).abs() <= 2.0**-8 * magnitude + 1e-5).all()


def test_float32_fast_layers_equal_plain_layers(gpu_vae: AudioVAE) -> None:
    plain = WindowedVocoder(gpu_vae, PATCH_SIZE, dtype=torch.float32, cuda_graphs=False, custom_ops=False,
                            fast_layers=False)
    fast = WindowedVocoder(gpu_vae, PATCH_SIZE, dtype=torch.float32, custom_ops=False, fast_layers=True,
                           max_new_patches=1)
    assert fast.fast_layers and fast.graphs is not None and fast.graphs.failure is None
    # Stream starts (short windows) and a batch of full windows, each length replaying its own graph.
    windows = stream_windows(patches(12, seed=1), plain.window_patches) + full_windows(5, plain.window_patches, seed=2)
    for a, b in zip(plain.decode(windows), fast.decode(windows)):
        assert b.dtype == np.float32 and b.shape == (plain.samples_per_patch,)
        assert np.abs(a - b).max() <= FP32_TOLERANCE


def test_float32_fast_graphs_at_256_windows_equal_each_window_alone(gpu_vae: AudioVAE) -> None:
    fast = WindowedVocoder(gpu_vae, PATCH_SIZE, dtype=torch.float32, fast_layers=True, max_new_patches=1)
    eager = WindowedVocoder(gpu_vae, PATCH_SIZE, dtype=torch.float32, cuda_graphs=False, fast_layers=True)
    windows = full_windows(256, fast.window_patches, seed=3)
    batched = fast.decode(windows)
    assert fast.graphs.failure is None and (fast.window_patches, 1, 256) in fast.graphs.captured
    for index in (0, 127, 255):
        assert np.abs(batched[index] - eager.decode([windows[index]])[0]).max() <= FP32_TOLERANCE


@pytest.mark.parametrize("custom_ops", (False, True))
def test_bfloat16_fast_layers_within_the_bf16_bound(gpu_vae: AudioVAE, custom_ops: bool) -> None:
    if custom_ops and library.library() is None:
        pytest.skip(f"kernels library not loaded ({library.library_status()})")
    reference = WindowedVocoder(gpu_vae, PATCH_SIZE, dtype=torch.float32, cuda_graphs=False, custom_ops=False,
                                fast_layers=False)
    plain = WindowedVocoder(gpu_vae, PATCH_SIZE, dtype=torch.bfloat16, custom_ops=custom_ops, fast_layers=False,
                            max_new_patches=1)
    fast = WindowedVocoder(gpu_vae, PATCH_SIZE, dtype=torch.bfloat16, custom_ops=custom_ops, fast_layers=True,
                           max_new_patches=1)
    window_patches = reference.window_patches
    windows = stream_windows(patches(16, seed=4), window_patches) + full_windows(8, window_patches, seed=5)
    expected = np.concatenate(reference.decode(windows))
    errors = {name: audio_errors(np.concatenate(vocoder.decode(windows)), expected)
              for name, vocoder in (("plain", plain), ("fast", fast))}
    assert fast.graphs is not None and fast.graphs.failure is None
    print(f"custom_ops={custom_ops} bf16 vs fp32 (relative RMS, max abs): "
          + ", ".join(f"{k} {v[0]:.2e} {v[1]:.2e}" for k, v in errors.items()))
    relative_rms, max_abs = errors["fast"]
    assert relative_rms <= BF16_RELATIVE_RMS and max_abs <= BF16_MAX_ABS


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_residual_unit_runs_its_second_snake_inside_the_conv_kernel(gpu_vae: AudioVAE, dtype: torch.dtype,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    if library.library() is None:
        pytest.skip(f"kernels library not loaded ({library.library_status()})")
    source = [m for m in gpu_vae.decoder.modules() if isinstance(m, ResidualUnit)][5]  # dilation 9
    unit = copy.deepcopy(source).to(dtype)
    reference = copy.deepcopy(unit).float()  # the same (rounded) weights through the PyTorch layers
    for module in unit.modules():
        if isinstance(module, Snake1d):
            module.use_op = True
    channels, length = unit.block[0].alpha.shape[1], 1200
    generator = torch.Generator(device="cuda").manual_seed(9)
    x = (0.5 * torch.randn(2, channels, length, generator=generator, device="cuda")).to(dtype)
    with torch.inference_mode():
        expected = reference(x.float())

        def separate_snake(*args, **kwargs):
            raise AssertionError("the residual unit ran a separate Snake pass")

        monkeypatch.setattr(ops, "snake", separate_snake)
        monkeypatch.setattr(ops, "snake_ref", separate_snake)
        forward = unit(x)
        unit.fast_path = True
        unit.build_bias_channel()
        buffer = torch.cat([x, x.new_zeros(2, BIAS_CHANNELS, length)], dim=1)
        accumulated = unit.accumulate_(buffer)[:, :channels]
    assert torch.equal(buffer[:, channels:], torch.zeros_like(buffer[:, channels:]))
    for out in (forward, accumulated):
        error = (out.float() - expected).abs()
        if dtype == torch.float32:
            assert error.max() <= 1e-4 * (1 + expected.abs().max()), f"max error {error.max().item():.3g}"
        else:  # one bf16 rounding of the Snake output and of the unit's output: ~2^-8 relative each
            relative_rms = error.pow(2).mean().sqrt() / expected.pow(2).mean().sqrt()
            assert relative_rms <= BF16_RELATIVE_RMS, f"relative RMS {relative_rms.item():.3g}"


def test_residual_units_run_in_aligned_contiguous_buffers(gpu_vae: AudioVAE) -> None:
    fast = WindowedVocoder(gpu_vae, PATCH_SIZE, dtype=torch.bfloat16, cuda_graphs=False, fast_layers=True)
    buffers: list[torch.Tensor] = []
    units = [m for m in fast.decoder.modules() if isinstance(m, ResidualUnit)]
    assert len(units) == 18 and all(unit.bias_channel is not None for unit in units)
    for unit in units:
        unit.accumulate_ = lambda buffer, run=unit.accumulate_: buffers.append(buffer) or run(buffer)
    try:
        fast.decode(full_windows(3, fast.window_patches, seed=6))
    finally:
        for unit in units:
            del unit.accumulate_
    assert len(buffers) == 18
    for x in buffers:
        assert x.is_contiguous() and x.data_ptr() % 16 == 0 and x.shape[-1] % ALIGN_SAMPLES == 0, \
            (tuple(x.shape), x.stride(), x.data_ptr() % 16)


def test_chunks_survive_the_next_call(gpu_vae: AudioVAE) -> None:
    # The pinned staging buffer is reused by every call: what a call returned must be a copy.
    fast = WindowedVocoder(gpu_vae, PATCH_SIZE, dtype=torch.bfloat16, fast_layers=True, max_new_patches=1)
    first = fast.decode(full_windows(4, fast.window_patches, seed=7))
    kept = [chunk.copy() for chunk in first]
    second = fast.decode(full_windows(4, fast.window_patches, seed=8))
    assert all(np.array_equal(a, b) for a, b in zip(first, kept))
    assert not np.array_equal(first[0], second[0])
