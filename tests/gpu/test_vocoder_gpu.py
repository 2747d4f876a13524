"""The AudioVAE and WindowedVocoder at the real VoxCPM2 shapes on a CUDA device (random weights,
TF32 off): the float32 trimmed windowed decode (graphed for full windows) equals the offline decode, the GPU matches the CPU,
a batch of full-length windows (what Triton's dynamic batcher hands over) decodes each stream as if
alone, windows of several new patches replay their graphs, and the bfloat16 vocoder (the CUDA
default) stays within BF16_* of the float32 one, also on a chunked stream."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from tests.gpu.vocoder_checks import (BF16_MAX_ABS, BF16_RELATIVE_RMS, FP32_TOLERANCE, LATENT_DIM, PATCH_SIZE,
                                      audio_errors, patches, stream_windows)
from voxcpm_triton.audio.audio_vae import AudioVAE
from voxcpm_triton.audio.chunks import DEFAULT_MAX_NEW, PatchChunker
from voxcpm_triton.audio.vocoder import WindowedVocoder

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.usefixtures("no_tf32"),
]


@pytest.fixture(scope="module")
def gpu_vocoder(gpu_vae: AudioVAE) -> WindowedVocoder:
    return WindowedVocoder(gpu_vae, PATCH_SIZE, dtype=torch.float32)


@pytest.fixture(scope="module")
def bf16_vocoder(gpu_vocoder: WindowedVocoder) -> WindowedVocoder:
    return WindowedVocoder(gpu_vocoder.audio_vae, PATCH_SIZE, dtype=torch.bfloat16)


def _latents(stream: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(stream).permute(2, 0, 1).reshape(1, LATENT_DIM, -1)


def test_window_size_of_the_released_decoder(gpu_vocoder: WindowedVocoder) -> None:
    # Decoder rates [8, 6, 5, 2, 2, 2] with kernel-7 convs and dilations 1/3/9 read 20 latent frames
    # of history: 5 patches of context + the new one.
    assert (gpu_vocoder.context_frames, gpu_vocoder.window_patches) == (20, 6)
    assert gpu_vocoder.samples_per_patch == 7680
    assert gpu_vocoder.trim  # the CUDA default: the offline comparisons below check it is exact


def test_bfloat16_vocoder_close_to_float32(gpu_vocoder: WindowedVocoder, bf16_vocoder: WindowedVocoder) -> None:
    assert next(bf16_vocoder.decoder.parameters()).dtype == torch.bfloat16
    assert next(gpu_vocoder.audio_vae.parameters()).dtype == torch.float32  # the shared VAE is not cast
    windows = stream_windows(patches(16, seed=3), gpu_vocoder.window_patches)
    reference = np.concatenate(gpu_vocoder.decode(windows))
    chunks = bf16_vocoder.decode(windows)
    assert all(c.dtype == np.float32 and c.shape == (gpu_vocoder.samples_per_patch,) for c in chunks)
    relative_rms, max_abs = audio_errors(np.concatenate(chunks), reference)
    print(f"bf16 vs fp32: relative RMS {relative_rms:.2e}, max abs {max_abs:.2e}, "
          f"audio RMS {np.sqrt(np.mean(reference**2)):.3f}")
    assert relative_rms <= BF16_RELATIVE_RMS and max_abs <= BF16_MAX_ABS


def test_windowed_decode_equals_offline_on_gpu(gpu_vocoder: WindowedVocoder) -> None:
    stream = patches(16, seed=1)
    chunks = np.concatenate(gpu_vocoder.decode(stream_windows(stream, gpu_vocoder.window_patches)))
    with torch.inference_mode():
        offline = gpu_vocoder.audio_vae.decode(_latents(stream).cuda())[0, 0].cpu().numpy()
    assert np.abs(chunks - offline).max() <= FP32_TOLERANCE


def test_graphed_decode_equals_eager(gpu_vocoder: WindowedVocoder) -> None:
    eager = WindowedVocoder(gpu_vocoder.audio_vae, PATCH_SIZE, dtype=torch.float32, cuda_graphs=False)
    assert eager.graphs is None and gpu_vocoder.graphs is not None
    windows = [patches(gpu_vocoder.window_patches, seed=20 + i) for i in range(3)]  # bucket 4, one padding row
    graphed = gpu_vocoder.decode(windows)
    assert gpu_vocoder.graphs.failure is None and (gpu_vocoder.window_patches, 1, 4) in gpu_vocoder.graphs.captured
    for a, b in zip(graphed, eager.decode(windows)):
        assert np.abs(a - b).max() <= FP32_TOLERANCE


def test_short_windows_replay_graphs_equal_to_eager(gpu_vocoder: WindowedVocoder) -> None:
    """A stream's first windows (fewer patches than a full window) replay their own graphs."""
    eager = WindowedVocoder(gpu_vocoder.audio_vae, PATCH_SIZE, dtype=torch.float32, cuda_graphs=False)
    full = gpu_vocoder.window_patches
    windows = [patches(1, seed=40), patches(2, seed=41), patches(2, seed=42), patches(full, seed=43)]
    graphed = gpu_vocoder.decode(windows)
    captured = gpu_vocoder.graphs.captured
    assert gpu_vocoder.graphs.failure is None
    assert {(1, 1, 1), (2, 1, 2), (full - 1, 1, 256), (full, 1, 256)} <= set(captured)
    assert gpu_vocoder.graphs.get(1, full + 1) is None and gpu_vocoder.graphs.get(257, 1) is None
    for a, b in zip(graphed, eager.decode(windows)):
        assert np.abs(a - b).max() <= FP32_TOLERANCE


def test_multi_patch_windows_replay_graphs_equal_to_eager(gpu_vocoder: WindowedVocoder) -> None:
    """Windows carrying 2-4 new patches (chunks.PatchChunker under load) replay their own graphs."""
    eager = WindowedVocoder(gpu_vocoder.audio_vae, PATCH_SIZE, dtype=torch.float32, cuda_graphs=False)
    full = gpu_vocoder.window_patches
    shapes = [(3, 2), (full + 1, 2), (7, 4), (full + 3, 4), (full + 2, 3)]
    windows = [patches(length, seed=60 + i) for i, (length, _) in enumerate(shapes)]
    news = [new for _, new in shapes]
    graphed = gpu_vocoder.decode(windows, news)
    captured = set(gpu_vocoder.graphs.captured)
    assert gpu_vocoder.graphs.failure is None and {(length, new, 1) for length, new in shapes} <= captured
    for a, b, new in zip(graphed, eager.decode(windows, news), news):
        assert a.shape == (new * gpu_vocoder.samples_per_patch,)
        assert np.abs(a - b).max() <= FP32_TOLERANCE


def test_bfloat16_chunked_stream_close_to_float32(gpu_vocoder: WindowedVocoder,
                                                  bf16_vocoder: WindowedVocoder) -> None:
    """The served path: a stream's patches grouped 1, 2, 4, 4, ... (chunks.PatchChunker) and decoded
    by the bfloat16 vocoder from its graphs, against the float32 one-patch-per-window decode."""
    stream = patches(16, seed=4)
    reference = np.concatenate(gpu_vocoder.decode(stream_windows(stream, gpu_vocoder.window_patches)))
    chunker = PatchChunker(bf16_vocoder.window_patches, DEFAULT_MAX_NEW)
    chunks = []
    for index, window in enumerate(stream_windows(stream, bf16_vocoder.window_patches)):
        taken = chunker.feed(window, finished=index == len(stream) - 1)
        if taken is not None:
            chunks.append(taken)
    assert [new for _, new in chunks] == [1, 2, 4, 4, 4, 1]
    audio = np.concatenate(bf16_vocoder.decode([w for w, _ in chunks], [new for _, new in chunks]))
    captured = {key[:2] for key in bf16_vocoder.graphs.captured}
    assert bf16_vocoder.graphs.failure is None and {(w.shape[0], new) for w, new in chunks} <= captured
    relative_rms, max_abs = audio_errors(audio, reference)
    assert relative_rms <= BF16_RELATIVE_RMS and max_abs <= BF16_MAX_ABS


def test_gpu_decode_matches_cpu(full_size_vae: AudioVAE, gpu_vocoder: WindowedVocoder) -> None:
    latents = _latents(patches(6, seed=2))
    with torch.inference_mode():
        on_cpu = full_size_vae.decode(latents)
        on_gpu = gpu_vocoder.audio_vae.decode(latents.cuda()).cpu()
    assert (on_cpu - on_gpu).abs().max().item() <= FP32_TOLERANCE


def test_batch_of_full_windows_equals_each_alone(gpu_vocoder: WindowedVocoder) -> None:
    windows = [patches(gpu_vocoder.window_patches, seed=10 + i) for i in range(64)]
    gpu_vocoder.decode(windows[:2])  # warm-up (cuDNN algorithm choice)
    torch.cuda.synchronize()
    start = time.perf_counter()
    batched = gpu_vocoder.decode(windows)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    for index in (0, 31, 63):
        alone = gpu_vocoder.decode([windows[index]])[0]
        assert np.abs(alone - batched[index]).max() <= FP32_TOLERANCE
    audio_seconds = len(windows) * gpu_vocoder.samples_per_patch / gpu_vocoder.sample_rate
    print(f"64 windows of {gpu_vocoder.window_patches} patches: {elapsed * 1e3:.1f} ms "
          f"for {audio_seconds:.2f} s of audio")
