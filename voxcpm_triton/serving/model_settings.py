"""Settings every VoxCPM model folder reads from its config.pbtxt `parameters` and from Triton's
instance arguments: which checkpoint, which device, which dtype.

The checkpoint is one setting for the whole repository: the VOXCPM_CHECKPOINT environment variable
when set, else each config's `checkpoint` parameter. A relative path is taken from the model
repository's folder, so the committed default works from wherever tritonserver is started. A LoRA
adapter from VoxCPM's fine-tuning (VOXCPM_LORA, else ar_decoder's `lora` parameter) is merged into
the decoder's weights as they load; the other models do not read the weights it changes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import NamedTuple

import torch

from voxcpm_triton.audio.chunks import DEFAULT_MAX_NEW
from voxcpm_triton.checkpoint.loader import LoadedCheckpoint, load_checkpoint
from voxcpm_triton.ops import lt_cache
from voxcpm_triton.voice_cache import voices_folder

CHECKPOINT_ENV = "VOXCPM_CHECKPOINT"
LORA_ENV = "VOXCPM_LORA"
VOICE_FOLDER_ENV = "VOXCPM_VOICE_FOLDER"
MPS_PRIORITY_ENV = "VOXCPM_DECODER_MPS_PRIORITY"
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def string_parameters(model_config: dict) -> dict[str, str]:
    """config.pbtxt `parameters { key: ... value: { string_value: ... } }` as a plain dict."""
    return {key: value["string_value"] for key, value in model_config.get("parameters", {}).items()}


def _in_repository(setting: str, model_folder: str) -> Path:
    """A setting's path; a relative one is taken from the model repository (the folder above
    `model_folder`, the model's own folder, which Triton passes as model_repository)."""
    path = Path(setting)
    return path if path.is_absolute() else Path(model_folder).resolve().parent / path


def checkpoint_folder(parameters: dict[str, str], model_folder: str) -> Path:
    """The checkpoint folder this repository serves; an error naming both settings if it is missing."""
    setting = os.environ.get(CHECKPOINT_ENV) or parameters.get("checkpoint")
    if not setting:
        raise ValueError(f"no checkpoint: set {CHECKPOINT_ENV} or the 'checkpoint' parameter in config.pbtxt")
    path = _in_repository(setting, model_folder)
    if not (path / "config.json").is_file():
        what = "has no config.json" if path.is_dir() else "does not exist"
        raise ValueError(
            f"checkpoint folder {path} {what} (from {CHECKPOINT_ENV} or the 'checkpoint' "
            "parameter); make the demo one with build/setup.sh or point the setting at a VoxCPM folder"
        )
    return path.resolve()


def lora_folder(parameters: dict[str, str], model_folder: str) -> Path | None:
    """The LoRA adapter the decoder merges into the checkpoint's weights: VOXCPM_LORA when set, else
    the `lora` parameter (relative: from the model repository, as `checkpoint`); empty: none."""
    setting = os.environ.get(LORA_ENV, parameters.get("lora", ""))
    if not setting:
        return None
    path = _in_repository(setting, model_folder)
    if not path.is_dir():
        raise ValueError(f"LoRA adapter folder {path} (from {LORA_ENV} or the 'lora' parameter) does not exist")
    return path.resolve()


def voice_folder(parameters: dict[str, str], model_folder: str, server_pid: int) -> Path:
    """Where the text_encoder keeps registered voices: VOXCPM_VOICE_FOLDER when set, else the
    `voice_folder` parameter (relative: from the model repository), else a tmpfs folder of this
    server alone (voice_cache.voices_folder). A folder of one's own keeps the voices across restarts
    and shares them with every server on the host that names it."""
    setting = os.environ.get(VOICE_FOLDER_ENV) or parameters.get("voice_folder", "")
    return _in_repository(setting, model_folder).resolve() if setting else voices_folder(server_pid)


def apply_lt_cache(parameters: dict[str, str], model_folder: str) -> None:
    """Point lt_cache at the `lt_cache` parameter's file (relative: from the model repository, as
    `checkpoint`; `model_folder` is the model's own folder in it) unless VOXCPM_LT_CACHE is already
    set; an empty value keeps no file."""
    setting = parameters.get("lt_cache", "")
    if lt_cache.ENV in os.environ or not setting:
        return
    os.environ[lt_cache.ENV] = str(_in_repository(setting, model_folder).resolve())


def apply_mps_priority(parameters: dict[str, str]) -> None:
    """Under CUDA MPS, the scheduling priority of this process's kernels against the other models'
    (the driver's CUDA_MPS_CLIENT_PRIORITY: "0" normal, "1" below normal), read by the driver when
    the process first touches the GPU: VOXCPM_DECODER_MPS_PRIORITY when set, else the `mps_priority`
    parameter; empty leaves what the process inherited. Below normal lets a vocoder window that is
    due run ahead of the decoder's queued step instead of behind it."""
    value = os.environ.get(MPS_PRIORITY_ENV, parameters.get("mps_priority", ""))
    if not value:
        return
    if value not in ("0", "1"):
        raise ValueError(f"mps_priority={value!r} (or {MPS_PRIORITY_ENV}); allowed: '', '0', '1'")
    os.environ["CUDA_MPS_CLIENT_PRIORITY"] = value


def instance_device(args: dict) -> str:
    """'cuda:N' for a KIND_GPU instance, 'cpu' for KIND_CPU."""
    if args.get("model_instance_kind") == "GPU":
        return f"cuda:{int(args['model_instance_device_id'])}"
    return "cpu"


def torch_dtype(parameters: dict[str, str], default: str = "float32") -> torch.dtype:
    name = parameters.get("dtype", default)
    if name not in DTYPES:
        raise ValueError(f"parameter dtype={name!r}; allowed {sorted(DTYPES)}")
    return DTYPES[name]


def chunk_patches(parameters: dict[str, str]) -> int:
    """`chunk_patches`: new patches per window at most (ar_decoder), the largest count with CUDA
    graphs (vocoder); the two models' configs keep it equal."""
    return int_parameter(parameters, "chunk_patches", DEFAULT_MAX_NEW, 1, 64)


def int_parameter(parameters: dict[str, str], name: str, default: int, low: int, high: int) -> int:
    raw = parameters.get(name, str(default))
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"parameter {name}={raw!r} is not an integer") from None
    if not low <= value <= high:
        raise ValueError(f"parameter {name}={value} is out of range; allowed {low}..{high}")
    return value


def apply_torch_threads(parameters: dict[str, str]) -> None:
    """Honour the optional `torch_threads` parameter. The CPU configs set 1: the three model
    processes share the machine's cores, and several multi-threaded torch pools spinning against
    each other are many times slower than one thread each."""
    if "torch_threads" in parameters:
        torch.set_num_threads(int_parameter(parameters, "torch_threads", 1, 1, 1024))


class AudioSide(NamedTuple):
    parameters: dict[str, str]
    folder: Path
    device: str
    loaded: LoadedCheckpoint


def load_audio_side(args: dict) -> AudioSide:
    """What text_encoder and vocoder start from: their settings, and the checkpoint's tokenizer and
    AudioVAE (float32) on the instance's device; neither needs the LM weights."""
    parameters = string_parameters(json.loads(args["model_config"]))
    apply_torch_threads(parameters)
    folder = checkpoint_folder(parameters, args["model_repository"])
    device = instance_device(args)
    loaded = load_checkpoint(folder, device="cpu", with_model=False)
    loaded.audio_vae.to(device)
    return AudioSide(parameters, folder, device, loaded)
