"""load_checkpoint: good tiny checkpoints of every variant load; a missing, extra, mis-shaped or
mis-typed tensor (model or AudioVAE file) fails with the tensor's name in the message; alternative file
formats (pytorch_model.bin, audiovae.safetensors) load the same weights; a file that cannot be read
(truncated, not JSON, pickled code) fails with the file's name."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from voxcpm_triton.audio.audio_vae import AudioVAE
from voxcpm_triton.checkpoint.loader import CheckpointError, load_checkpoint
from voxcpm_triton.checkpoint.make import VARIANTS, make_checkpoint
from voxcpm_triton.model.voxcpm import VoxCPMModel


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("ckpt")
    return {variant: make_checkpoint(root / variant, variant) for variant in VARIANTS}


def _copy(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "ckpt"
    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize("variant", VARIANTS)
def test_good_checkpoint_loads(checkpoints: dict[str, Path], variant: str) -> None:
    loaded = load_checkpoint(checkpoints[variant])
    assert loaded.config.variant == variant
    assert isinstance(loaded.model, VoxCPMModel) and not loaded.model.training
    assert isinstance(loaded.audio_vae, AudioVAE)
    file_state = load_file(str(checkpoints[variant] / "model.safetensors"))
    for name, tensor in loaded.model.state_dict().items():
        assert torch.equal(tensor, file_state[name]), name
    vae_names = list(loaded.audio_vae.state_dict())
    assert not any(name.endswith(("weight_g", "weight_v")) for name in vae_names)
    assert loaded.tokenizer.encode("<|audio_start|>") == [loaded.config.audio_start_token]


def test_without_model_needs_no_model_file(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    folder = _copy(checkpoints["voxcpm2"], tmp_path)
    (folder / "model.safetensors").unlink()
    loaded = load_checkpoint(folder, with_model=False)
    assert loaded.model is None
    full = load_checkpoint(checkpoints["voxcpm2"])
    for a, b in zip(full.audio_vae.state_dict().values(), loaded.audio_vae.state_dict().values()):
        assert torch.equal(a, b)
    assert loaded.tokenizer.encode("hello") == full.tokenizer.encode("hello")


def test_dtype_applies_to_model_not_vae(checkpoints: dict[str, Path]) -> None:
    loaded = load_checkpoint(checkpoints["voxcpm2"], dtype=torch.bfloat16)
    assert {p.dtype for p in loaded.model.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in loaded.audio_vae.parameters()} == {torch.float32}
    with pytest.raises(ValueError, match="dtype"):
        load_checkpoint(checkpoints["voxcpm2"], dtype=torch.int8)


def _edit_model_file(folder: Path, edit) -> None:
    path = folder / "model.safetensors"
    state = load_file(str(path))
    edit(state)
    save_file(state, str(path))


def test_missing_model_tensor_is_named(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    folder = _copy(checkpoints["voxcpm2"], tmp_path)
    _edit_model_file(folder, lambda s: (s.pop("stop_head.weight"), s.pop("base_lm.norm.weight")))
    with pytest.raises(CheckpointError, match="missing tensors: base_lm.norm.weight, stop_head.weight"):
        load_checkpoint(folder)


def test_unexpected_model_tensor_is_named(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    folder = _copy(checkpoints["voxcpm1.5"], tmp_path)
    _edit_model_file(folder, lambda s: s.__setitem__("base_lm.extra_head.weight", torch.zeros(2, 2)))
    with pytest.raises(CheckpointError, match=r"model.safetensors .*unexpected tensors: base_lm.extra_head.weight"):
        load_checkpoint(folder)


def test_misshaped_model_tensor_is_named(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    folder = _copy(checkpoints["voxcpm0.5b"], tmp_path)
    _edit_model_file(folder, lambda s: s.__setitem__("enc_to_lm_proj.weight", torch.zeros(3, 5)))
    with pytest.raises(CheckpointError, match=r"mis-shaped tensors: enc_to_lm_proj.weight \(file \(3, 5\)"):
        load_checkpoint(folder)


def test_mistyped_tensors_are_named(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    folder = _copy(checkpoints["voxcpm2"], tmp_path)

    def edit(state: dict) -> None:
        state["base_lm.embed_tokens.weight"] = state["base_lm.embed_tokens.weight"].to(torch.int64)
        state["stop_head.weight"] = state["stop_head.weight"].to(torch.bfloat16)  # another float: cast, fine

    _edit_model_file(folder, edit)
    payload = torch.load(folder / "audiovae.pth", weights_only=True)
    payload["state_dict"]["decoder.sr_bin_boundaries"] = payload["state_dict"]["decoder.sr_bin_boundaries"].float()
    torch.save(payload, folder / "audiovae.pth")
    with pytest.raises(CheckpointError, match=r"mis-typed tensors: base_lm.embed_tokens.weight \(file torch.int64, "
                                              r"expected torch.float32\)$"):
        load_checkpoint(folder)
    _edit_model_file(folder, lambda s: s.__setitem__("base_lm.embed_tokens.weight",
                                                     s["base_lm.embed_tokens.weight"].float()))
    with pytest.raises(CheckpointError, match=r"audiovae.pth .*mis-typed tensors: decoder.sr_bin_boundaries "
                                              r"\(file torch.float32, expected torch.int32\)"):
        load_checkpoint(folder)


def test_all_problems_reported_together(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    folder = _copy(checkpoints["voxcpm2"], tmp_path)

    def edit(state: dict) -> None:
        state.pop("fusion_concat_proj.bias")
        state["audio_vae.decoder.model.0.weight_g"] = torch.zeros(1)  # VAE keys do not belong here
        state["stop_proj.weight"] = torch.zeros(1, 1)

    _edit_model_file(folder, edit)
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(folder)
    message = str(error.value)
    for name in ("fusion_concat_proj.bias", "audio_vae.decoder.model.0.weight_g", "stop_proj.weight"):
        assert name in message


def test_vae_problems_are_named(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    folder = _copy(checkpoints["voxcpm2"], tmp_path)
    payload = torch.load(folder / "audiovae.pth", weights_only=True)
    state = payload["state_dict"]
    state.pop("decoder.sr_cond_model.2.scale_embed.weight")
    state["encoder.fc_mu.weight_v"] = torch.zeros(1, 2, 3)
    torch.save(payload, folder / "audiovae.pth")
    with pytest.raises(CheckpointError) as error:
        load_checkpoint(folder)
    message = str(error.value)
    assert message.startswith(f"{folder / 'audiovae.pth'} does not match config.json")
    assert "missing tensors: decoder.sr_cond_model.2.scale_embed.weight" in message
    assert "encoder.fc_mu.weight_v (file (1, 2, 3)" in message


def test_alternative_file_formats(checkpoints: dict[str, Path], tmp_path: Path) -> None:
    folder = _copy(checkpoints["voxcpm2"], tmp_path)
    reference = load_checkpoint(folder)
    torch.save(load_file(str(folder / "model.safetensors")), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    save_file(torch.load(folder / "audiovae.pth", weights_only=True)["state_dict"], str(folder / "audiovae.safetensors"))
    (folder / "audiovae.pth").unlink()
    loaded = load_checkpoint(folder)
    for a, b in zip(reference.model.state_dict().values(), loaded.model.state_dict().values()):
        assert torch.equal(a, b)
    for a, b in zip(reference.audio_vae.state_dict().values(), loaded.audio_vae.state_dict().values()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("missing, message", [("model.safetensors", "model weights"),
                                              ("audiovae.pth", "AudioVAE weights"),
                                              ("tokenizer.json", "tokenizer.json")])
def test_missing_files_are_reported(checkpoints: dict[str, Path], tmp_path: Path, missing: str, message: str) -> None:
    folder = _copy(checkpoints["voxcpm1.5"], tmp_path)
    (folder / missing).unlink()
    with pytest.raises((CheckpointError, FileNotFoundError), match=message):
        load_checkpoint(folder)


class _RunsCode:
    def __reduce__(self):
        return (print, ("a checkpoint must not run code",))


@pytest.mark.parametrize("damage, message", [
    (lambda folder: (folder / "model.safetensors").write_bytes((folder / "model.safetensors").read_bytes()[:1000]),
     r"model\.safetensors: cannot be read as a tensor file \(truncated or not one\?\)"),
    (lambda folder: (folder / "audiovae.pth").write_bytes(b""), r"audiovae\.pth: cannot be read as a tensor file"),
    (lambda folder: torch.save({"state_dict": {"x": _RunsCode()}}, folder / "audiovae.pth"),
     r"audiovae\.pth: holds objects other than tensors"),
    (lambda folder: (folder / "config.json").write_bytes(b"\xff\xfe garbage"), r"config\.json: not valid JSON"),
    (lambda folder: (folder / "tokenizer.json").write_text("{bad"), r"tokenizer\.json: not a tokenizer file"),
    (lambda folder: (folder / "tokenizer_config.json").write_text("[1]"),
     r"tokenizer_config\.json: expected a JSON object"),
])
def test_unreadable_files_are_named(checkpoints: dict[str, Path], tmp_path: Path, damage, message: str) -> None:
    folder = _copy(checkpoints["voxcpm2"], tmp_path)
    damage(folder)
    with pytest.raises(ValueError, match=message):
        load_checkpoint(folder)


@pytest.mark.parametrize("visible, device, message", [
    (0, "cuda", "'cuda': this process sees no CUDA GPU"),
    (2, "cuda:2", r"'cuda:2': this process sees 2 CUDA GPU\(s\)"),
])
def test_an_unusable_device_is_named_before_any_file_is_read(checkpoints: dict[str, Path], monkeypatch,
                                                             visible: int, device: str, message: str) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: visible > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: visible)
    with pytest.raises(ValueError, match=message):
        load_checkpoint(checkpoints["voxcpm2"], device=device)
