"""The snake op on the CPU: its reference is the official AudioVAE's Snake expression bit for bit,
the custom-op plumbing (schema, fake tensor) holds, arguments are validated with messages naming the
tensor, Snake1d with the op switched on still runs the reference here, and the vocoder built with
custom ops on the CPU keeps the shared float32 decoder and its exact windowed decode."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.reference_shim import import_reference
from voxcpm_triton import ops
from voxcpm_triton.audio.audio_vae import build_audio_vae
from voxcpm_triton.audio.vae_layers import Snake1d
from voxcpm_triton.audio.vocoder import WindowedVocoder


def inputs(shape: tuple[int, ...], dtype: torch.dtype = torch.float32, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(*shape, generator=g) * 3).to(dtype)
    alpha = (torch.rand(1, shape[-2], 1, generator=g) * 2 + 0.05).to(dtype)
    return x, alpha


def test_reference_matches_float64_formula():
    x, alpha = inputs((3, 16, 101))
    x64, a64 = x.double(), alpha.double()
    expected = x64 + torch.sin(a64 * x64) ** 2 / (a64 + 1e-9)
    torch.testing.assert_close(ops.snake_ref(x, alpha).double(), expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_reference_equals_the_official_snake_bit_for_bit(dtype):
    voxcpm = import_reference()
    if voxcpm is None:
        pytest.skip("reference voxcpm package not installed")
    from voxcpm.modules.audiovae.audio_vae_v2 import snake as official_snake

    x, alpha = inputs((2, 8, 77), dtype)
    assert torch.equal(ops.snake_ref(x, alpha), official_snake(x, alpha))


@pytest.mark.parametrize("use_op", (False, True))
def test_snake1d_runs_the_reference_on_the_cpu(use_op):
    module = Snake1d(8)
    x, alpha = inputs((2, 8, 33))
    with torch.no_grad():
        module.alpha.copy_(alpha)
    module.use_op = use_op
    assert torch.equal(module(x), ops.snake_ref(x, alpha))


def test_op_on_cpu_takes_2d_input_flat_alpha_and_trimmed_views():
    x, alpha = inputs((4, 16, 50))
    assert torch.equal(ops.snake(x[0], alpha.flatten()), ops.snake_ref(x, alpha)[0])
    trimmed = x[..., -37:]
    out = ops.snake(trimmed, alpha)
    assert out.is_contiguous() and torch.equal(out, ops.snake_ref(trimmed, alpha))


def test_custom_op_schema_and_fake_tensor():
    x, alpha = inputs((2, 8, 40))
    torch.library.opcheck(torch.ops.voxcpm.snake, (x, alpha.flatten()),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


@pytest.mark.parametrize("x_shape, alpha_shape, dtype, message", [
    ((8, 5, 4, 3), (1, 5, 1), torch.float32, "x must be a floating"),
    ((2, 8, 10), (1, 8, 1), torch.int32, "x must be a floating"),
    ((2, 0, 10), (1, 0, 1), torch.float32, "C > 0 channels and T > 0"),
    ((2, 8, 0), (1, 8, 1), torch.float32, "C > 0 channels and T > 0"),
    ((2, 8, 10), (1, 7, 1), torch.float32, r"alpha must have shape \[8\] or \[1, 8, 1\]"),
    ((2, 8, 10), (8, 1), torch.float32, r"alpha must have shape \[8\]"),
])
def test_validation_names_the_bad_argument(x_shape, alpha_shape, dtype, message):
    with pytest.raises(ValueError, match=message):
        ops.snake(torch.zeros(x_shape, dtype=dtype), torch.ones(alpha_shape))


def test_validation_of_strides_and_alpha_dtype():
    x, alpha = inputs((2, 8, 10))
    with pytest.raises(ValueError, match="x's last dimension must be contiguous"):
        ops.snake(x.transpose(1, 2).contiguous().transpose(1, 2), alpha)
    with pytest.raises(ValueError, match="alpha must be torch.float32"):
        ops.snake(x, alpha.double())


def test_vocoder_with_custom_ops_on_the_cpu_keeps_the_exact_float32_decode():
    torch.manual_seed(0)
    vae = build_audio_vae(dict(encoder_dim=4, encoder_rates=[2, 5], latent_dim=8, decoder_dim=32,
                               decoder_rates=[5, 2, 3], sr_bin_boundaries=[20000, 30000, 40000]), "voxcpm2")
    with torch.no_grad():
        for name, param in vae.named_parameters():
            if name.endswith("weight_g"):
                param.mul_(0.5)  # keeps activations off the tanh's saturation, as in test_vocoder
    vae = vae.fold_weight_norm().eval()
    vocoder = WindowedVocoder(vae, 4, custom_ops=True)
    assert not vocoder.custom_ops and vocoder.decoder is vae.decoder
    assert not any(m.use_op for m in vae.modules() if isinstance(m, Snake1d))
    patches = np.random.default_rng(1).standard_normal((2 * vocoder.window_patches, 4, 8)).astype(np.float32)
    windows = [patches[max(0, i + 1 - vocoder.window_patches): i + 1] for i in range(len(patches))]
    chunks = np.concatenate(vocoder.decode(windows))
    with torch.no_grad():
        offline = vae.decode(torch.from_numpy(patches).permute(2, 0, 1).reshape(1, 8, -1))[0, 0].numpy()
    assert np.abs(chunks - offline).max() <= 1e-5
