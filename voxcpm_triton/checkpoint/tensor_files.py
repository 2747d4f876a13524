"""Reading a checkpoint's tensor files, and the error every mismatch with its config.json raises."""

from __future__ import annotations

import pickle
from pathlib import Path

import torch
from safetensors.torch import load_file


class CheckpointError(ValueError):
    """The checkpoint folder does not match what its config.json describes."""


def first_existing(folder: Path, names: tuple[str, ...], what: str) -> Path:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise CheckpointError(f"{what}: none of {', '.join(names)} in checkpoint folder {str(folder)!r}")


def read_tensors(path: Path, device: torch.device | str) -> dict[str, torch.Tensor]:
    try:
        if path.suffix == ".safetensors":
            return load_file(str(path), device=str(device))
        # weights_only: a checkpoint must not be able to run code at load time.
        payload = torch.load(path, map_location=device, weights_only=True)
    except pickle.UnpicklingError:
        raise CheckpointError(f"{path}: holds objects other than tensors, which are not loaded (they could run "
                              "code); save its state dict of tensors alone") from None
    except Exception as exc:  # the libraries' errors for a truncated or foreign file name no file
        raise CheckpointError(f"{path}: cannot be read as a tensor file (truncated or not one?): "
                              f"{type(exc).__name__}: {exc}") from exc
    if isinstance(payload, dict) and isinstance(payload.get("state_dict"), dict):
        payload = payload["state_dict"]
    if not isinstance(payload, dict) or not all(isinstance(v, torch.Tensor) for v in payload.values()):
        raise CheckpointError(f"{path.name}: expected a dict of tensors (optionally under 'state_dict')")
    return payload


def _kind(t: torch.Tensor) -> str:
    if t.dtype == torch.bool:
        return "bool"
    return "complex" if t.is_complex() else "floating" if t.is_floating_point() else "integer"


def check_tensors(file_name: str, expected: dict[str, torch.Tensor], found: dict[str, torch.Tensor]) -> None:
    """Raise CheckpointError naming every missing, unexpected, mis-shaped and mis-typed tensor. A
    tensor's dtype may differ from the model's (it is cast as it loads: bf16 files into an fp32
    model), but not its kind: a floating-point parameter stored as integers, or an integer buffer
    stored as floats, is refused."""
    missing = sorted(set(expected) - set(found))
    unexpected = sorted(set(found) - set(expected))
    present = [name for name in expected if name in found]
    misshaped = sorted(
        f"{name} (file {tuple(found[name].shape)}, expected {tuple(expected[name].shape)})"
        for name in present if tuple(found[name].shape) != tuple(expected[name].shape)
    )
    mistyped = sorted(
        f"{name} (file {found[name].dtype}, expected {expected[name].dtype})"
        for name in present if _kind(found[name]) != _kind(expected[name])
    )
    problems = []
    if missing:
        problems.append(f"missing tensors: {', '.join(missing)}")
    if unexpected:
        problems.append(f"unexpected tensors: {', '.join(unexpected)}")
    if misshaped:
        problems.append(f"mis-shaped tensors: {', '.join(misshaped)}")
    if mistyped:
        problems.append(f"mis-typed tensors: {', '.join(mistyped)}")
    if problems:
        raise CheckpointError(f"{file_name} does not match config.json: " + "; ".join(problems))
