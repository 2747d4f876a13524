"""LoRA adapters from VoxCPM's official fine-tuning, merged into the base weights as they load.

An adapter is a folder holding `lora_weights.safetensors` (or `lora_weights.ckpt`), the trained
pairs `<layer>.lora_A` [r, in] and `<layer>.lora_B` [out, r], and `lora_config.json`:
{"base_model": ..., "lora_config": {"enable_lm", "enable_dit", "enable_proj", "r", "alpha",
"target_modules_lm", "target_modules_dit", "target_proj_modules", ...}}. Without the json, the
reference's defaults for a bare weights file apply (LM and LocDiT attention, r 8, alpha 16).

The reference keeps each pair beside its Linear and adds x A^T B^T * alpha / r to the layer's
output. That equals x (W + alpha / r * B A)^T, so the product is added to W once, in float32, and
the merged weight is rounded to the serving dtype once: the engine's fused kernels and CUDA graphs
then serve the fine-tuned model at the base model's speed.

Strict like the base loader, where the reference skips silently: a pair for a layer the config does
not adapt, half a pair, or a shape that does not fit its layer is a CheckpointError naming it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from pathlib import Path

import torch

from voxcpm_triton.checkpoint.tensor_files import CheckpointError, first_existing, read_tensors

WEIGHT_FILES = ("lora_weights.safetensors", "lora_weights.ckpt")
CONFIG_FILE = "lora_config.json"
_LM_STACKS = ("base_lm.", "residual_lm.")
_LOCDIT = "feat_decoder.estimator."
_ATTENTION = ("q_proj", "v_proj", "k_proj", "o_proj")
_PROJECTIONS = ("enc_to_lm_proj", "lm_to_dit_proj", "res_to_dit_proj")


@dataclass(frozen=True)
class LoraSettings:
    """The reference's LoRAConfig fields (dropout only matters in training)."""

    enable_lm: bool = False
    enable_dit: bool = False
    enable_proj: bool = False
    r: int = 8
    alpha: float = 16
    dropout: float = 0.0
    target_modules_lm: tuple[str, ...] = _ATTENTION
    target_modules_dit: tuple[str, ...] = _ATTENTION
    target_proj_modules: tuple[str, ...] = _PROJECTIONS

    @property
    def scaling(self) -> float:
        return self.alpha / self.r

    def adapts(self, layer: str) -> bool:
        """Whether the reference wraps the Linear named `layer` (a state-dict prefix) in LoRA."""
        name = layer.rsplit(".", 1)[-1]
        return ((self.enable_lm and layer.startswith(_LM_STACKS) and name in self.target_modules_lm)
                or (self.enable_dit and layer.startswith(_LOCDIT) and name in self.target_modules_dit)
                or (self.enable_proj and layer in self.target_proj_modules))


def read_settings(folder: Path, is_v2: bool) -> LoraSettings:
    """lora_config.json's settings, or the reference's defaults for a folder without one."""
    # VoxCPM2's reference config also adapts the LM/residual fusion projection.
    defaults = LoraSettings(target_proj_modules=_PROJECTIONS + (("fusion_concat_proj",) if is_v2 else ()))
    path = folder / CONFIG_FILE
    if not path.is_file():
        return replace(defaults, enable_lm=True, enable_dit=True)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))["lora_config"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{path}: not a LoRA config with a 'lora_config' object ({exc})") from None
    if not isinstance(raw, dict):
        raise CheckpointError(f"{path}: 'lora_config' is not an object")
    known = {f.name for f in fields(LoraSettings)}
    unknown = sorted(set(raw) - known)
    if unknown:
        # A field added by a later VoxCPM could change what the weights mean: refuse, do not guess.
        raise CheckpointError(f"{path}: 'lora_config' has fields this loader does not know: {unknown}; "
                              f"known: {sorted(known)}")
    # Checked before use: a string "false" is truthy, and a string of names would match by substring.
    for name in ("enable_lm", "enable_dit", "enable_proj"):
        if name in raw and not isinstance(raw[name], bool):
            raise CheckpointError(f"{path}: {name} must be true or false, got {raw[name]!r}")
    for name in ("target_modules_lm", "target_modules_dit", "target_proj_modules"):
        if name in raw and not (isinstance(raw[name], list) and all(isinstance(v, str) for v in raw[name])):
            raise CheckpointError(f"{path}: {name} must be a list of module names, got {raw[name]!r}")
    settings = replace(defaults, **{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})
    if isinstance(settings.r, bool) or not isinstance(settings.r, int) or settings.r < 1 \
            or not isinstance(settings.alpha, (int, float)):
        raise CheckpointError(f"{path}: r must be a positive integer and alpha a number, got r={settings.r!r}, "
                              f"alpha={settings.alpha!r}")
    return settings


def merge_lora(state: dict[str, torch.Tensor], folder: str | Path, is_v2: bool) -> int:
    """Add every adapter pair of `folder` into `state` (the base model's tensors by official name,
    changed in place to float32 where merged); returns how many layers changed."""
    folder = Path(folder)
    settings = read_settings(folder, is_v2)
    pairs = read_tensors(first_existing(folder, WEIGHT_FILES, "LoRA weights"), "cpu")
    halves = (".lora_A", ".lora_B")
    problems = [f"{key} (not a lora_A / lora_B tensor)" for key in sorted(pairs) if not key.endswith(halves)]
    layers = {key.rsplit(".", 1)[0] for key in pairs if key.endswith(halves)}
    for layer in sorted(layers):
        down, up, weight = pairs.get(f"{layer}.lora_A"), pairs.get(f"{layer}.lora_B"), state.get(f"{layer}.weight")
        if down is None or up is None:
            problems.append(f"{layer} (only one of lora_A and lora_B)")
        elif weight is None or not settings.adapts(layer):
            problems.append(f"{layer} (no layer of this model that lora_config.json adapts)")
        elif weight.ndim != 2:
            problems.append(f"{layer} (its weight {tuple(weight.shape)} is not a Linear layer's)")
        elif not (down.is_floating_point() and up.is_floating_point()):
            problems.append(f"{layer} (lora_A {down.dtype}, lora_B {up.dtype}: not floating point)")
        elif down.shape != (settings.r, weight.shape[1]) or up.shape != (weight.shape[0], settings.r):
            problems.append(f"{layer} (lora_A {tuple(down.shape)}, lora_B {tuple(up.shape)} for a weight "
                            f"{tuple(weight.shape)} at r={settings.r})")
    if problems:
        raise CheckpointError(f"LoRA adapter {str(folder)!r} does not fit this checkpoint: " + "; ".join(problems))
    for layer in layers:
        base = state[f"{layer}.weight"]
        up, down = (pairs[f"{layer}.lora_{half}"].to(base.device, torch.float32) for half in "BA")
        state[f"{layer}.weight"] = base.float() + settings.scaling * (up @ down)
    return len(layers)
