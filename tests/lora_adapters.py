"""LoRA adapter folders in the official layout, for the LoRA tests of every tier."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")


def write_adapter(folder: Path, pairs: dict[str, torch.Tensor], settings: dict | None) -> Path:
    """lora_weights.safetensors with `pairs`, and lora_config.json with `settings` (None: none)."""
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in pairs.items()}, str(folder / "lora_weights.safetensors"))
    if settings is not None:
        (folder / "lora_config.json").write_text(json.dumps({"base_model": "unused", "lora_config": settings}))
    return folder


def random_pairs(checkpoint: Path, stacks: tuple[str, ...], r: int, scale: float, seed: int) -> dict[str, torch.Tensor]:
    """Random lora_A / lora_B pairs of rank r (values scaled by `scale`) for every attention
    projection under `stacks` (state-dict prefixes) of the checkpoint's model.safetensors."""
    generator = torch.Generator().manual_seed(seed)
    pairs = {}
    for name, weight in load_file(checkpoint / "model.safetensors").items():
        layer = name.removesuffix(".weight")
        if name.endswith(".weight") and layer.startswith(stacks) and layer.rsplit(".", 1)[-1] in ATTENTION:
            pairs[f"{layer}.lora_A"] = torch.randn(r, weight.shape[1], generator=generator) * scale
            pairs[f"{layer}.lora_B"] = torch.randn(weight.shape[0], r, generator=generator) * scale
    return pairs
