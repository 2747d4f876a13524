"""Strict loading of a checkpoint folder in the official layout.

The reference loads with strict=False, so a checkpoint with a missing or renamed tensor silently
runs with random weights. Here every tensor file is compared with the modules built from
config.json before anything is copied, and one CheckpointError lists every missing, unexpected and
mis-shaped tensor by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from voxcpm_triton.audio.audio_vae import AudioVAE, build_audio_vae
from voxcpm_triton.checkpoint.lora import merge_lora
from voxcpm_triton.checkpoint.tensor_files import CheckpointError, check_tensors, first_existing, read_tensors
from voxcpm_triton.config import ModelConfig, load_config
from voxcpm_triton.model.voxcpm import VoxCPMModel, build_model
from voxcpm_triton.text.tokenizer import TextTokenizer

_MODEL_FILES = ("model.safetensors", "pytorch_model.bin")
_VAE_FILES = ("audiovae.safetensors", "audiovae.pth")
_SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


@dataclass
class LoadedCheckpoint:
    config: ModelConfig
    model: VoxCPMModel | None  # eval mode, weights in the requested dtype; None if with_model=False
    audio_vae: AudioVAE  # eval mode, float32, weight norm folded
    tokenizer: TextTokenizer
    folder: Path


def _load_model(folder: Path, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
                lora: str | Path | None) -> VoxCPMModel:
    model_path = first_existing(folder, _MODEL_FILES, "model weights")
    model_state = read_tensors(model_path, device)
    with torch.device(device):
        model = build_model(config)
    check_tensors(str(model_path), model.state_dict(), model_state)
    if lora is not None:
        merge_lora(model_state, lora, config.is_v2)
    model.to(dtype)
    model.load_state_dict(model_state, strict=True)
    return model.eval()


def check_device(device: torch.device | str) -> None:
    """A device this process cannot use is named as such before any file is read; otherwise the
    weight file's read fails first and reads as a damaged file."""
    device = torch.device(device)
    if device.type != "cuda":
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise ValueError(f"device {str(device)!r}: this process sees no CUDA GPU")
    if device.index is not None and device.index >= count:
        raise ValueError(f"device {str(device)!r}: this process sees {count} CUDA GPU(s)")


def load_checkpoint(folder: str | Path, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu",
                    with_model: bool = True, lora: str | Path | None = None) -> LoadedCheckpoint:
    """Config, model (in `dtype`), AudioVAE (fp32, folded) and tokenizer from a checkpoint folder.

    with_model=False skips model.safetensors (model is None): the text encoder and the vocoder need
    only the AudioVAE and the tokenizer, and a full-size LM would cost them ~9 GB and its init time.
    lora: an official LoRA adapter folder, merged into the model's weights (checkpoint.lora)."""
    folder = Path(folder)
    check_device(device)
    if dtype not in _SUPPORTED_DTYPES:
        raise ValueError(f"dtype={dtype}; allowed: {', '.join(str(d) for d in _SUPPORTED_DTYPES)}")
    config = load_config(folder)
    model = _load_model(folder, config, dtype, device, lora) if with_model else None

    vae_path = first_existing(folder, _VAE_FILES, "AudioVAE weights")
    vae_state = read_tensors(vae_path, "cpu")
    audio_vae = build_audio_vae(config)
    check_tensors(str(vae_path), audio_vae.state_dict(), vae_state)
    audio_vae.load_state_dict(vae_state, strict=True)
    # The VAE stays fp32 whatever the LM dtype (as in the reference): its output is the waveform.
    audio_vae = audio_vae.fold_weight_norm().to(device=device, dtype=torch.float32)

    tokenizer = TextTokenizer.from_folder(folder)
    if tokenizer.vocab_size > config.lm.vocab_size:
        raise CheckpointError(
            f"tokenizer.json has {tokenizer.vocab_size} tokens but lm_config.vocab_size is {config.lm.vocab_size}"
        )
    return LoadedCheckpoint(config, model, audio_vae.eval(), tokenizer, folder)
