"""Reading request tensors at the server's edge, with errors that name the tensor and what it must be.

Triton already rejects a dtype or shape that contradicts config.pbtxt; these checks cover what the
config cannot say (element counts of optional scalars, UTF-8, finiteness)."""

from __future__ import annotations

from typing import TypeVar

import numpy as np

from voxcpm_triton.audio.prompt_audio import check_unit_range

Number = TypeVar("Number", int, float)


class InputError(ValueError):
    """A request tensor is missing, malformed or out of range; the message is sent to the client."""


def _squeeze_batch(name: str, array: np.ndarray) -> np.ndarray:
    # Batched models see [1, ...] per request; ensembles and direct callers may omit the batch dim.
    if array.ndim >= 1 and array.shape[0] == 1 and array.ndim > 1:
        return array[0]
    return array


def text(name: str, array: np.ndarray | None, required: bool = True) -> str | None:
    """One UTF-8 string from a BYTES tensor holding exactly one element."""
    if array is None:
        if required:
            raise InputError(f"{name} is required")
        return None
    flat = np.asarray(array).reshape(-1)
    if flat.size != 1:
        raise InputError(f"{name} must hold exactly one string, got {flat.size} elements")
    value = flat[0]
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{name} is not valid UTF-8 ({exc.reason} at byte {exc.start})") from None
    if isinstance(value, str):
        return value
    raise InputError(f"{name} must be a BYTES (string) tensor, got {type(value).__name__} elements")


def scalar(name: str, array: np.ndarray | None, kind: type[Number], default: Number | None = None) -> Number | None:
    """One number from a tensor holding exactly one element; `default` when the tensor is absent."""
    if array is None:
        return default
    flat = np.asarray(array).reshape(-1)
    if flat.size != 1:
        raise InputError(f"{name} must hold exactly one value, got {flat.size} elements")
    value = kind(flat[0].item())
    if kind is float and not np.isfinite(value):
        raise InputError(f"{name} must be finite, got {value}")
    return value


def in_range(name: str, value: Number, low: float, high: float) -> Number:
    """`value` if low <= value <= high, else an InputError naming the allowed range."""
    if not low <= value <= high:
        raise InputError(f"{name}={value} is out of range; allowed {low}..{high}")
    return value


def audio(name: str, array: np.ndarray | None) -> np.ndarray | None:
    """A mono float32 waveform from a [samples] (or [1, samples]) tensor; non-empty, within [-1, 1]."""
    if array is None:
        return None
    wave = _squeeze_batch(name, np.asarray(array))
    if wave.ndim != 1:
        raise InputError(f"{name} must be a 1-D mono waveform [samples], got shape {list(array.shape)}")
    if wave.size == 0:
        raise InputError(f"{name} is empty; send at least one sample or leave {name} out")
    if not np.isfinite(wave).all():
        bad = int((~np.isfinite(wave)).sum())
        raise InputError(f"{name} holds {bad} non-finite samples (NaN or Inf)")
    try:
        check_unit_range(name, wave)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return np.ascontiguousarray(wave, dtype=np.float32)
