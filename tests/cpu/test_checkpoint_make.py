"""make_checkpoint: official layout, every key of the reference's config classes, deterministic,
small, non-degenerate, and loadable by the reference's own from_local."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.reference_shim import import_reference
from voxcpm_triton.checkpoint.make import VARIANTS, config_dict, main, make_checkpoint
from voxcpm_triton.config import parse_config

LAYOUT = {"config.json", "model.safetensors", "audiovae.pth", "tokenizer.json", "tokenizer_config.json",
          "special_tokens_map.json"}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("made")
    return {variant: make_checkpoint(root / variant, variant, seed=0) for variant in VARIANTS}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("variant", VARIANTS)
def test_layout_and_size(checkpoints: dict[str, Path], variant: str) -> None:
    folder = checkpoints[variant]
    assert {p.name for p in folder.iterdir()} == LAYOUT
    assert sum(p.stat().st_size for p in folder.iterdir()) < 8 * 2**20
    config = json.loads((folder / "config.json").read_text())
    assert config["dtype"] == "float32" and config["device"] == "cpu"
    assert parse_config(config).variant == variant
    model_state = load_file(str(folder / "model.safetensors"))
    assert not any(name.startswith("audio_vae.") for name in model_state)
    assert all(t.dtype == torch.float32 and torch.isfinite(t).all() for t in model_state.values())
    vae_state = torch.load(folder / "audiovae.pth", weights_only=True)["state_dict"]
    assert any(name.endswith("weight_g") for name in vae_state)
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    assert tokenizer_config["tokenizer_class"] == "LlamaTokenizerFast"


def test_deterministic_and_seeded(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    again = make_checkpoint(tmp_path / "again", "voxcpm2", seed=0)
    other = make_checkpoint(tmp_path / "other", "voxcpm2", seed=1)
    for name in ("model.safetensors", "config.json", "tokenizer.json"):
        assert _digest(again / name) == _digest(checkpoints["voxcpm2"] / name)
    assert _digest(other / "model.safetensors") != _digest(again / "model.safetensors")
    vae_a = torch.load(again / "audiovae.pth", weights_only=True)["state_dict"]
    vae_b = torch.load(checkpoints["voxcpm2"] / "audiovae.pth", weights_only=True)["state_dict"]
    assert all(torch.equal(vae_a[k], vae_b[k]) for k in vae_a)


def test_cli_writes_a_checkpoint(tmp_path: Path) -> None:
    main(["--variant", "voxcpm0.5b", "--size", "tiny", "--out", str(tmp_path / "cli")])
    assert {p.name for p in (tmp_path / "cli").iterdir()} == LAYOUT


def test_full_size_config_is_voxcpm2_shaped() -> None:
    config = parse_config(config_dict("voxcpm2", "full"))
    assert (config.lm.hidden_size, config.lm.num_hidden_layers, config.lm.vocab_size) == (2048, 28, 73448)
    assert (config.encoder.num_layers, config.dit.num_layers, config.residual_lm_num_layers) == (12, 12, 8)
    assert config.dtype == "bfloat16" and config.sample_rate == 48000 and config.encode_sample_rate == 16000
    with pytest.raises(ValueError, match="'voxcpm2' only"):
        config_dict("voxcpm1.5", "full")


def _reference_field_names(model_class) -> set[str]:
    return set(model_class.model_fields)


@pytest.mark.reference
@pytest.mark.parametrize("variant", VARIANTS)
def test_config_has_every_reference_key(variant: str) -> None:
    if import_reference() is None:
        pytest.skip("reference voxcpm package not installed")
    from voxcpm.model import voxcpm as v1, voxcpm2 as v2
    from voxcpm.modules.audiovae import AudioVAEConfig, AudioVAEConfigV2
    from voxcpm.modules.locdit import CfmConfig
    from voxcpm.modules.minicpm4 import MiniCPM4Config

    module = v2 if variant == "voxcpm2" else v1
    vae_class = AudioVAEConfigV2 if variant == "voxcpm2" else AudioVAEConfig
    config = config_dict(variant)
    assert _reference_field_names(module.VoxCPMConfig) <= set(config)
    # no_rope is derived by the model for the residual LM, never written in a checkpoint's lm_config.
    assert _reference_field_names(MiniCPM4Config) - {"no_rope"} <= set(config["lm_config"])
    assert _reference_field_names(module.VoxCPMEncoderConfig) <= set(config["encoder_config"])
    assert _reference_field_names(module.VoxCPMDitConfig) <= set(config["dit_config"])
    assert _reference_field_names(CfmConfig) <= set(config["dit_config"]["cfm_config"])
    assert _reference_field_names(vae_class) <= set(config["audio_vae_config"])


@pytest.mark.reference
@pytest.mark.parametrize("variant", VARIANTS)
def test_reference_from_local_loads_every_tensor(checkpoints: dict[str, Path], variant: str) -> None:
    if import_reference() is None:
        pytest.skip("reference voxcpm package not installed")
    from voxcpm.model import VoxCPM2Model, VoxCPMModel

    folder = checkpoints[variant]
    model_class = VoxCPM2Model if variant == "voxcpm2" else VoxCPMModel
    reference = model_class.from_local(str(folder), optimize=False, device="cpu")
    # from_local uses strict=False: check ourselves that every tensor came from the files.
    model_state = load_file(str(folder / "model.safetensors"))
    vae_state = torch.load(folder / "audiovae.pth", weights_only=True)["state_dict"]
    files = {**model_state, **{f"audio_vae.{k}": v for k, v in vae_state.items()}}
    loaded = reference.state_dict()
    assert set(loaded) == set(files)
    for name, tensor in loaded.items():
        assert torch.equal(tensor, files[name]), name
    torch.manual_seed(0)
    audio = reference.generate(target_text="hello world", max_len=3)
    assert audio.shape[-1] > 0 and torch.isfinite(audio).all() and audio.abs().mean() > 1e-3
