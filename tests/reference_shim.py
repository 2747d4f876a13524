"""Make the reference `voxcpm` package importable on this machine.

`voxcpm` imports torchaudio (VoxCPM1 model file) and librosa (VoxCPM2 model file) at module level,
and neither has a build for torch 2.13. They are only used to read prompt audio from disk, so stand-in
modules that read WAV files with soundfile are enough for the parity tests. Stand-ins are installed
only when the real package cannot be imported, so an environment that has them is left untouched.

Usage: `from tests.reference_shim import import_reference` then `voxcpm = import_reference()`
(returns None when the reference is not installed, so tests can skip).
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import types

import numpy as np
import torch


def _read_wav(path: str) -> tuple[np.ndarray, int]:
    import soundfile

    audio, sample_rate = soundfile.read(path, dtype="float32", always_2d=True)
    return audio.T, int(sample_rate)  # [channels, samples]


def _unsupported(name: str):
    def call(*args, **kwargs):
        raise NotImplementedError(
            f"{name} is not available in the reference stand-in; pass audio already at the model's rate"
        )

    return call


def _torchaudio_stub() -> types.ModuleType:
    module = types.ModuleType("torchaudio")
    functional = types.ModuleType("torchaudio.functional")

    def load(path: str):
        audio, sample_rate = _read_wav(path)
        return torch.from_numpy(np.ascontiguousarray(audio)), sample_rate

    def resample(waveform: torch.Tensor, orig_freq: int, new_freq: int) -> torch.Tensor:
        if orig_freq != new_freq:
            _unsupported("torchaudio.functional.resample")()
        return waveform

    functional.resample = resample
    functional.loudness = _unsupported("torchaudio.functional.loudness")
    functional.gain = _unsupported("torchaudio.functional.gain")
    module.load = load
    module.save = _unsupported("torchaudio.save")
    module.functional = functional
    return module


def _librosa_stub() -> types.ModuleType:
    module = types.ModuleType("librosa")
    effects = types.ModuleType("librosa.effects")

    def load(path: str, sr: int | None = 22050, mono: bool = True):
        audio, sample_rate = _read_wav(path)
        if mono:
            audio = audio.mean(axis=0)
        if sr is not None and sr != sample_rate:
            raise NotImplementedError(
                f"librosa stand-in cannot resample {sample_rate} Hz -> {sr} Hz; write the prompt at {sr} Hz"
            )
        return audio.astype(np.float32), sample_rate

    effects.trim = _unsupported("librosa.effects.trim")
    module.load = load
    module.effects = effects
    return module


def install_stand_ins() -> None:
    """Put stand-ins on sys.modules for torchaudio/librosa where the real ones are missing."""
    for name, factory in (("torchaudio", _torchaudio_stub), ("librosa", _librosa_stub)):
        if name in sys.modules:
            continue
        if importlib.util.find_spec(name) is not None:
            continue
        stub = factory()
        # A spec keeps importlib.util.find_spec (used by transformers' availability probes) working;
        # without package metadata those probes still report the stand-in as absent.
        stub.__spec__ = importlib.machinery.ModuleSpec(name, loader=None)
        stub.__stand_in__ = True
        sys.modules[name] = stub
        for attr in ("functional", "effects"):
            if hasattr(stub, attr):
                sys.modules[f"{name}.{attr}"] = getattr(stub, attr)


def import_reference() -> types.ModuleType | None:
    """Import the reference `voxcpm` package with stand-ins installed; None if it is not installed."""
    if importlib.util.find_spec("voxcpm") is None:
        return None
    install_stand_ins()
    return importlib.import_module("voxcpm")
