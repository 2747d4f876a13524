"""The AudioVAE and WindowedVocoder at the real VoxCPM2 shapes on a CUDA device (random weights,
fp32, TF32 off): windowed decode equals the offline decode, the GPU matches the CPU, and a batch of
full-length windows (what Triton's dynamic batcher hands over) decodes each stream as if alone."""

from __future__ import annotations

import copy
import time

import numpy as np
import pytest
import torch

from voxcpm_triton.audio.audio_vae import AudioVAE, build_audio_vae
from voxcpm_triton.audio.vocoder import WindowedVocoder
from voxcpm_triton.checkpoint.make import config_dict, random_vae_state

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

TOLERANCE = 1e-4
PATCH_SIZE = 4


@pytest.fixture(autouse=True)
def no_tf32():
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


@pytest.fixture(scope="module")
def cpu_vae() -> AudioVAE:
    config = config_dict("voxcpm2", "full")
    vae = build_audio_vae(config["audio_vae_config"], "voxcpm2")
    vae.load_state_dict(random_vae_state(config, seed=0))
    return vae.fold_weight_norm().eval()


@pytest.fixture(scope="module")
def gpu_vocoder(cpu_vae: AudioVAE) -> WindowedVocoder:
    return WindowedVocoder(copy.deepcopy(cpu_vae).cuda(), PATCH_SIZE)


def _patches(count: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (0.5 * rng.standard_normal((count, PATCH_SIZE, 64))).astype(np.float32)


def _latents(patches: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(patches).permute(2, 0, 1).reshape(1, 64, -1)


def test_window_size_of_the_released_decoder(gpu_vocoder: WindowedVocoder) -> None:
    # Decoder rates [8, 6, 5, 2, 2, 2] with kernel-7 convs and dilations 1/3/9 read 20 latent frames
    # of history: 5 patches of context + the new one.
    assert (gpu_vocoder.context_frames, gpu_vocoder.window_patches) == (20, 6)
    assert gpu_vocoder.samples_per_patch == 7680


def test_windowed_decode_equals_offline_on_gpu(gpu_vocoder: WindowedVocoder) -> None:
    patches = _patches(16, seed=1)
    windows = [patches[max(0, i + 1 - gpu_vocoder.window_patches) : i + 1] for i in range(len(patches))]
    chunks = np.concatenate(gpu_vocoder.decode(windows))
    with torch.inference_mode():
        offline = gpu_vocoder.audio_vae.decode(_latents(patches).cuda())[0, 0].cpu().numpy()
    assert np.abs(chunks - offline).max() <= TOLERANCE


def test_gpu_decode_matches_cpu(cpu_vae: AudioVAE, gpu_vocoder: WindowedVocoder) -> None:
    latents = _latents(_patches(6, seed=2))
    with torch.inference_mode():
        on_cpu = cpu_vae.decode(latents)
        on_gpu = gpu_vocoder.audio_vae.decode(latents.cuda()).cpu()
    assert (on_cpu - on_gpu).abs().max().item() <= TOLERANCE


def test_batch_of_full_windows_equals_each_alone(gpu_vocoder: WindowedVocoder) -> None:
    windows = [_patches(gpu_vocoder.window_patches, seed=10 + i) for i in range(64)]
    gpu_vocoder.decode(windows[:2])  # warm-up (cuDNN algorithm choice)
    torch.cuda.synchronize()
    start = time.perf_counter()
    batched = gpu_vocoder.decode(windows)
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    for index in (0, 31, 63):
        alone = gpu_vocoder.decode([windows[index]])[0]
        assert np.abs(alone - batched[index]).max() <= TOLERANCE
    audio_seconds = len(windows) * gpu_vocoder.samples_per_patch / gpu_vocoder.sample_rate
    print(f"64 windows of {gpu_vocoder.window_patches} patches: {elapsed * 1e3:.1f} ms "
          f"for {audio_seconds:.2f} s of audio")
