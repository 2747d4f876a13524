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

Beside it, read-only, lt_cache_seed.json (VOXCPM_LT_CACHE_SEED names another; empty: none) holds
what walks and searches found on the H200 with cuBLASLt 130100 (perf/RESULTS.md run 69): the
served shapes' 0.5 s walks and the in-process 64-stream shapes' 3 s walks of run 68, and run 64's
30 s searches for the LocDiT's projections at 1408 rows (15 s at 5632). A shape takes whichever of
the two files' entries had the longer walk, so a first start on that GPU and library walks only
the shapes the seed lacks, and at 64 streams it gets the down projection that a 0.5 s walk misses
(19.7 -> 17.5 us, ~1% of the step). Its sections name the GPU and library, so elsewhere it is inert.
"""

from __future__ import annotations

import fcntl
import functools
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
SEED_ENV = "VOXCPM_LT_CACHE_SEED"
SEED = Path(__file__).with_name("lt_cache_seed.json")


@dataclass(frozen=True)
class Entry:
    """One shape's finalists, fastest first, and the walk budget that found them."""
    seconds: float
    configs: tuple[Config, ...]


def path() -> Path | None:
    """The cache file, or None where VOXCPM_LT_CACHE is unset or empty (no cache)."""
    value = os.environ.get(ENV, "")
    return Path(value) if value else None


def seed_path() -> Path | None:
    """The read-only seed file: VOXCPM_LT_CACHE_SEED where set (empty: none), else SEED."""
    value = os.environ.get(SEED_ENV)
    if value is None:
        return SEED
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
    """The shape's entry in the cache file or the seed, whichever had the longer walk (the cache
    file's on a tie), among those it can parse."""
    file, seed = path(), seed_path()
    # The cache file is read afresh each time (other processes write it); the seed never changes.
    sources = (_read(file) if file else {}, _read_seed(seed) if seed else {})
    section_name, shape = section(device), shape_name(key)
    entries = [entry for entry in (parse(data, section_name, shape) for data in sources) if entry is not None]
    return max(entries, key=lambda entry: entry.seconds) if entries else None


@functools.cache
def _read_seed(file: Path) -> dict:
    return _read(file)


def parse(data: dict, section_name: str, shape: str) -> Entry | None:
    """The entry under section_name and shape in a file's parsed JSON, or None."""
    raw = data.get(section_name, {}).get(shape)
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
