"""Our loader, AudioVAE, frontend, engine and vocoder against the golden outputs of the reference
package (tests/golden/*.safetensors, written by tests/golden/make_golden.py) on the three tiny
checkpoints: VAE encode/decode, and end-to-end latent patches and audio for zero-shot and voice
cloning (prompt continuation; VoxCPM2 also reference audio). fp32, max abs error <= 1e-4.
The `reference` test re-runs the reference live and checks it still produces the golden files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open

from tests.reference_shim import import_reference
from voxcpm_triton.audio.vocoder import WindowedVocoder
from voxcpm_triton.checkpoint.loader import LoadedCheckpoint, load_checkpoint
from voxcpm_triton.checkpoint.make import VARIANTS, make_checkpoint
from voxcpm_triton.engine.engine import Engine
from voxcpm_triton.frontend import Frontend

TOLERANCE = 1e-4
GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"


def _golden(variant: str) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    with safe_open(str(GOLDEN_DIR / f"{variant}.safetensors"), framework="pt") as handle:
        return {k: handle.get_tensor(k) for k in handle.keys()}, handle.metadata()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from tests.golden.make_golden import checkpoint_digest

    root = tmp_path_factory.mktemp("parity")
    folders = {}
    for variant in VARIANTS:
        folders[variant] = make_checkpoint(root / variant, variant, seed=0)
        expected = _golden(variant)[1]["checkpoint_digest"]
        assert checkpoint_digest(folders[variant]) == expected, (
            f"make_checkpoint('{variant}') no longer produces the weights the golden files were made with; "
            "rerun tests/golden/make_golden.py"
        )
    return folders


@pytest.fixture(scope="module")
def loaded(checkpoints: dict[str, Path]) -> dict[str, LoadedCheckpoint]:
    return {variant: load_checkpoint(folder) for variant, folder in checkpoints.items()}


def _max_error(ours: torch.Tensor | np.ndarray, expected: torch.Tensor) -> float:
    ours = torch.as_tensor(ours)
    assert ours.shape == expected.shape, (tuple(ours.shape), tuple(expected.shape))
    return (ours.float() - expected.float()).abs().max().item()


@pytest.mark.parametrize("variant", VARIANTS)
def test_audio_vae_matches_golden(loaded: dict[str, LoadedCheckpoint], variant: str) -> None:
    tensors, _ = _golden(variant)
    vae = loaded[variant].audio_vae
    with torch.inference_mode():
        encoded = vae.encode(tensors["vae.audio"][None])[0]
        decoded = vae.decode(tensors["vae.decode_latents"][None])[0, 0]
    assert _max_error(encoded, tensors["vae.latents"]) <= TOLERANCE
    assert _max_error(decoded, tensors["vae.decoded"]) <= TOLERANCE
    assert tensors["vae.decoded"].abs().mean() > 1e-3


def _generate(checkpoint: LoadedCheckpoint, settings: dict, case: str,
              tensors: dict[str, torch.Tensor]) -> tuple[torch.Tensor, np.ndarray]:
    """Run one request alone through frontend -> engine -> windowed vocoder."""
    voice = tensors.get(f"{case}.prompt_latents")
    request = Frontend(checkpoint).prepare(
        settings["text"],
        prompt_latents=voice if case == "continuation" else None,
        prompt_text=settings["prompt_text"] if case == "continuation" else None,
        reference_latents=voice if case == "reference" else None,
        min_len=settings["min_len"], max_len=settings["max_len"], cfg_value=settings["cfg_value"],
        timesteps=settings["inference_timesteps"], seed=settings["seed"], request_id=case,
    )
    vocoder = WindowedVocoder(checkpoint.audio_vae, checkpoint.config.patch_size)
    engine = Engine(checkpoint.model, max_slots=2, max_context=checkpoint.config.max_length, device="cpu",
                    window_patches=vocoder.window_patches)
    engine.submit(request)
    windows: list[np.ndarray] = []
    finished = False
    while not finished:
        for output in engine.step():
            assert output.error is None, output.error
            if output.window.shape[0]:
                windows.append(output.window)
            finished = finished or output.finished
    patches = torch.from_numpy(np.stack([window[-1] for window in windows]))
    audio = np.concatenate(vocoder.decode(windows))
    return patches, audio


CASES = [(v, c) for v in VARIANTS for c in ("zero_shot", "continuation", "reference")
         if c != "reference" or v == "voxcpm2"]


@pytest.mark.parametrize("variant, case", CASES)
def test_end_to_end_matches_golden(loaded: dict[str, LoadedCheckpoint], variant: str, case: str) -> None:
    tensors, metadata = _golden(variant)
    settings = json.loads(metadata["settings"])
    patches, audio = _generate(loaded[variant], settings, case, tensors)
    assert _max_error(patches, tensors[f"{case}.patches"]) <= TOLERANCE
    assert _max_error(audio, tensors[f"{case}.audio"]) <= TOLERANCE


@pytest.mark.reference
def test_reference_still_produces_the_golden_files(checkpoints: dict[str, Path]) -> None:
    if import_reference() is None:
        pytest.skip("reference voxcpm package not installed")
    from tests.golden.make_golden import golden_for

    variant = "voxcpm0.5b"  # the cheapest variant to regenerate; all three share the script
    live, _ = golden_for(variant, checkpoints[variant])
    stored, _ = _golden(variant)
    assert set(live) == set(stored)
    for name, tensor in stored.items():
        assert _max_error(live[name], tensor) <= TOLERANCE, name
