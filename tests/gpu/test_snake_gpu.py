"""The snake CUDA op against its reference (tolerances in voxcpm_triton/ops/snake.py) over the vocoder's
shapes and awkward ones (odd T, T below the vector width, C not a multiple of 8, trimmed and
channel-sliced views, a misaligned base pointer), in fp32 / bf16 / fp16; captured in a CUDA graph and
replayed on new data; and the full-size VoxCPM2 vocoder with the op: exact in float32 against the
offline decode, and in bf16 within the vocoder's bf16 bound of float32 (graphed, as served)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.gpu.vocoder_checks import (BF16_MAX_ABS, BF16_RELATIVE_RMS, FP32_TOLERANCE, LATENT_DIM, PATCH_SIZE,
                                      audio_errors, patches, stream_windows)
from voxcpm_triton import ops
from voxcpm_triton.audio.audio_vae import AudioVAE
from voxcpm_triton.audio.vae_layers import Snake1d
from voxcpm_triton.audio.vocoder import WindowedVocoder
from voxcpm_triton.ops import library

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

DEVICE = "cuda"
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}
# Trimmed vocoder activations (C, T) and odd ones: T < 8, T = 1, C not a multiple of 8.
SHAPES = [(1, 32, 7686), (3, 64, 1031), (2, 256, 223), (5, 2048, 18), (2, 7, 5), (4, 16, 1), (1, 1, 9),
          (3, 24, 64), (256, 32, 131)]


@pytest.fixture(scope="module", autouse=True)
def kernels_loaded():
    if torch.cuda.is_available():
        assert library.library() is not None, f"kernels library not loaded ({library.library_status()}); " \
                                              "build it with build/build_kernels.sh"


def make(shape: tuple[int, ...], dtype: torch.dtype, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    x = (torch.randn(*shape, generator=g, device=DEVICE) * 3).to(dtype)
    alpha = (torch.rand(1, shape[-2], 1, generator=g, device=DEVICE) * 2 + 0.1).to(dtype)
    return x, alpha


def check(out: torch.Tensor, x: torch.Tensor, alpha: torch.Tensor) -> None:
    assert out.shape == x.shape and out.dtype == x.dtype and out.is_contiguous()
    assert torch.isfinite(out).all()
    dtype = x.dtype
    if dtype == torch.float32:
        torch.testing.assert_close(out, ops.snake_ref(x, alpha), atol=1e-5, rtol=1e-5)
        return
    u = UNIT_ROUNDOFF[dtype]
    once = ops.snake_ref(x.float(), alpha.float()).to(dtype).float()
    error = (out.float() - once).abs()
    assert (error <= 2 * u * once.abs() + 2e-5).all(), f"max error against one rounding {error.max().item():.3g}"
    x32, a32 = x.float(), alpha.float().reshape(-1, 1)
    magnitude = x32.abs() + torch.sin(a32 * x32) ** 2 / a32
    per_op = (out.float() - ops.snake_ref(x, alpha).float()).abs()
    assert (per_op <= 6 * u * magnitude + 2e-5).all(), \
        f"max error against the per-op reference {(per_op / magnitude).max().item() / u:.2f} u"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_kernel_matches_reference(shape, dtype):
    x, alpha = make(shape, dtype, seed=sum(shape))
    check(ops.snake(x, alpha), x, alpha)


@pytest.mark.parametrize("dtype", DTYPES)
def test_two_dimensional_input_and_flat_alpha(dtype):
    x, alpha = make((1, 40, 333), dtype, seed=1)
    out = ops.snake(x[0], alpha.flatten())
    check(out.unsqueeze(0), x, alpha)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("keep", (7686, 7680, 3))
def test_views_trimmed_along_t(dtype, keep):
    # The vocoder trims each layer's input with x[..., -keep:]: rows are then not adjacent in memory.
    # keep = 7680 lets 16-byte vectors stay within rows; 7686 and 3 take the element-wise path.
    full, alpha = make((3, 32, 7700), dtype, seed=keep)
    x = full[..., -keep:]
    check(ops.snake(x, alpha), x, alpha)


@pytest.mark.parametrize("dtype", DTYPES)
def test_channel_slice_and_misaligned_base(dtype):
    full, alpha = make((2, 48, 96), dtype, seed=5)
    sliced = full[:, 8:24]
    check(ops.snake(sliced, alpha[:, 8:24].contiguous()), sliced, alpha[:, 8:24])
    # A base pointer one element past a 16-byte boundary: vectors are not allowed, results the same.
    flat = full.flatten()[1:1 + 2 * 48 * 95]
    shifted = flat.view(2, 48, 95)
    check(ops.snake(shifted, alpha), shifted, alpha)


def test_empty_batch():
    x, alpha = make((0, 8, 16), torch.bfloat16, seed=0)
    assert ops.snake(x, alpha).shape == (0, 8, 16)


def test_captured_in_a_cuda_graph_and_replayed_on_new_data():
    x, alpha = make((16, 64, 1031), torch.bfloat16, seed=11)
    trimmed_source, _ = make((16, 64, 2000), torch.bfloat16, seed=12)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ops.snake(x, alpha)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.snake(x, alpha)
        out_trimmed = ops.snake(trimmed_source[..., -1031:], alpha)
    fresh, _ = make((16, 64, 1031), torch.bfloat16, seed=13)
    fresh_source, _ = make((16, 64, 2000), torch.bfloat16, seed=14)
    x.copy_(fresh)
    trimmed_source.copy_(fresh_source)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, ops.snake(fresh, alpha))
    assert torch.equal(out_trimmed, ops.snake(fresh_source[..., -1031:], alpha))


def _uses_op(vocoder: WindowedVocoder) -> bool:
    snakes = [m for m in vocoder.decoder.modules() if isinstance(m, Snake1d)]
    return bool(snakes) and all(m.use_op for m in snakes)


def test_float32_vocoder_with_the_op_equals_offline_decode(gpu_vae: AudioVAE, no_tf32) -> None:
    vocoder = WindowedVocoder(gpu_vae, PATCH_SIZE, dtype=torch.float32, custom_ops=True, max_new_patches=1)
    assert vocoder.custom_ops and _uses_op(vocoder) and vocoder.decoder is not gpu_vae.decoder
    assert not any(m.use_op for m in gpu_vae.modules() if isinstance(m, Snake1d))
    stream = patches(16, seed=1)
    chunks = np.concatenate(vocoder.decode(stream_windows(stream, vocoder.window_patches)))
    assert vocoder.graphs is not None and vocoder.graphs.failure is None
    with torch.inference_mode():
        latents = torch.from_numpy(stream).permute(2, 0, 1).reshape(1, LATENT_DIM, -1).cuda()
        offline = gpu_vae.decode(latents)[0, 0].cpu().numpy()
    assert np.abs(chunks - offline).max() <= FP32_TOLERANCE


def test_bfloat16_vocoder_with_the_op_within_the_bf16_bound(gpu_vae: AudioVAE, no_tf32) -> None:
    reference = WindowedVocoder(gpu_vae, PATCH_SIZE, dtype=torch.float32, cuda_graphs=False, custom_ops=False)
    plain = WindowedVocoder(gpu_vae, PATCH_SIZE, dtype=torch.bfloat16, custom_ops=False, max_new_patches=1)
    fused = WindowedVocoder(gpu_vae, PATCH_SIZE, dtype=torch.bfloat16, custom_ops=True, max_new_patches=1)
    assert _uses_op(fused) and not _uses_op(plain)
    # Stream starts (short windows) and full windows, each length replaying its own graph, as served.
    windows = stream_windows(patches(16, seed=3), reference.window_patches)
    windows += stream_windows(patches(8 + reference.window_patches, seed=4), reference.window_patches)[-8:]
    expected = np.concatenate(reference.decode(windows))
    errors = {}
    for name, vocoder in (("plain", plain), ("fused", fused)):
        audio = np.concatenate(vocoder.decode(windows))
        assert vocoder.graphs is not None and vocoder.graphs.failure is None
        errors[name] = audio_errors(audio, expected)
    print("bf16 vs fp32 (relative RMS, max abs): " + ", ".join(f"{k} {v[0]:.2e} {v[1]:.2e}" for k, v in errors.items()))
    for relative_rms, max_abs in errors.values():
        assert relative_rms <= BF16_RELATIVE_RMS and max_abs <= BF16_MAX_ABS
