"""The configurations earlier lt_search walks found, kept in a JSON file between processes.

A served decoder walks cuBLASLt's configurations for each GEMM shape of 256+ rows while its graphs
warm up: 0.5 s a shape at every start, and a walk that short does not reach every shape's best (the
LocDiT's down projection at 1408 rows: 19.9 us after 0.5 s, 17.5 after 30 s; perf/RESULTS.md run
64). Where VOXCPM_LT_CACHE names a file, each walk's finalists are written to it under the GPU's
name, compute capability and cuBLASLt version, with the seconds the walk had. A later process
reuses them instead of walking, unless it is given a longer walk than the one that found them: one
start with a long VOXCPM_LT_SEARCH_S tunes the file for every later start.

What the file holds is only ever a candidate list: lt_gemm rebuilds each configuration (cuBLASLt
must still accept it for the shape) and times it against the heuristic's picks and F.linear,
checking its output, as it does a walk's finalists. So a stale or edited file can cost speed,
never a wrong product, and an unreadable one is overwritten.
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
import warnings
from dataclasses import astuple, dataclass
from pathlib import Path

import torch

from voxcpm_triton.ops import lt_gemm
from voxcpm_triton.ops.lt_search import Config


ENV = "VOXCPM_LT_CACHE"


@dataclass(frozen=True)
class Entry:
    """One shape's finalists, fastest first, and the walk budget that found them."""
    seconds: float
    configs: tuple[Config, ...]


def path() -> Path | None:
    """The cache file, or None where VOXCPM_LT_CACHE is unset or empty (no cache)."""
    value = os.environ.get(ENV, "")
    return Path(value) if value else None


def section(device: torch.device) -> str:
    """What a configuration's speed and validity depend on besides the shape."""
    major, minor = torch.cuda.get_device_capability(device)
    return f"{torch.cuda.get_device_name(device)} sm{major}{minor} cuBLASLt {lt_gemm.version()}"


def shape_name(key: tuple) -> str:
    """lt_gemm's plan key without the device index: rows x columns x depth, dtype, epilogue."""
    _, m, n, k, dtype, bias, *add = key
    return f"{m}x{n}x{k} {str(dtype).removeprefix('torch.')}{' bias' if bias else ''}{' add' if add else ''}"


def _read(file: Path) -> dict:
    try:
        data = json.loads(file.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        warnings.warn(f"lt_cache: ignoring unreadable {file} ({error})", stacklevel=3)
        return {}
    return data if isinstance(data, dict) else {}


def lookup(device: torch.device, key: tuple) -> Entry | None:
    """The shape's entry in the cache file, if there is one it can parse."""
    file = path()
    if file is None:
        return None
    raw = _read(file).get(section(device), {}).get(shape_name(key))
    try:
        return Entry(float(raw["seconds"]), tuple(Config(*map(int, config)) for config in raw["configs"]))
    except (TypeError, KeyError, ValueError):
        return None  # absent, or written by hand wrongly: the shape is walked and rewritten


def record(device: torch.device, key: tuple, entry: Entry) -> None:
    """Writes the shape's entry, keeping every other. Processes serving on several GPUs of a host
    may write at once: each holds a lock beside the file while it reads, updates and replaces it."""
    file = path()
    if file is None:
        return
    try:
        _replace_entry(file, section(device), shape_name(key), entry)
    except OSError as error:  # a read-only repository must not stop the graphs' warm-up
        warnings.warn(f"lt_cache: could not write {file} ({error})", stacklevel=2)


def _replace_entry(file: Path, section_name: str, shape: str, entry: Entry) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{file}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = _read(file)
        data.setdefault(section_name, {})[shape] = {
            "seconds": entry.seconds, "configs": [list(astuple(config)) for config in entry.configs]}
        handle, temporary = tempfile.mkstemp(dir=file.parent, prefix=f".{file.name}.")
        with os.fdopen(handle, "w") as out:
            json.dump(data, out, indent=1, sort_keys=True)
        os.replace(temporary, file)
