"""cuBLASLt algorithms one configuration field away from the heuristic's picks, searched by time.

cuBLASLt's heuristic offers at most 8 algorithms for the step's GEMMs (perf/RESULTS.md run 63), and
for the LocDiT's projections to 1024 columns at 1408 rows none of them is the fastest: a caller may
build an algorithm itself (an algorithm id, then a tile, stage count, split-k and its reduction,
swizzle, custom option and thread-block cluster shape among what the id supports), validated by
cublasLtMatmulAlgoCheck. Run 64 walked that space for 30 s a shape: down 21.2 -> 17.5 us, o_proj
11.3 -> 10.6, qkv 13.2 -> 12.5, from configurations two or three fields away from the heuristic's.

`walk` does the same greedily under a time budget, from the fastest configuration not walked from
yet (the heuristic's first), one field at a time, and returns the fastest few it found.
Candidates are timed in batches queued behind one sleeping kernel, so a batch costs about its GPU
time; checking a configuration (cublasLtMatmulAlgoCheck) costs host time. Only shapes of at least
MIN_ROWS rows are walked: at the LM's 64 the 30 s search gained 2-4% on 6-16 us kernels, not worth
0.5 s of start-up each; and a process stops walking after VOXCPM_LT_SEARCH_TOTAL_S (60 s).
"""

from __future__ import annotations

import ctypes
import os
import time
from collections.abc import Callable
from dataclasses import astuple, dataclass, replace

import torch

from voxcpm_triton.ops import lt_gemm

# Seconds a shape's walk may take while a graph warms up; VOXCPM_LT_SEARCH_S=0 keeps the heuristic's list.
DEFAULT_BUDGET_S = 0.5
DEFAULT_TOTAL_BUDGET_S = 60.0  # all walks of one process together
MIN_ROWS = 256
FINALISTS = 4  # configurations handed back, fastest first, for the caller to time against its own
BATCH = 24  # configurations timed behind one sleeping kernel
CALLS_PER_CONFIG = 4
LAUNCH_US = 30  # host time to queue one ctypes cuBLASLt call, with margin: sizes the sleeping kernel
CYCLES_PER_US = 2000

# cublasLt.h: algorithm capability and configuration attributes.
_CAP_SPLITK, _CAP_REDUCTION_MASK, _CAP_SWIZZLE, _CAP_TILE_IDS, _CAP_CUSTOM_MAX, _CAP_STAGES_IDS = 0, 1, 2, 6, 7, 13
_FIELDS = {"algo_id": (0, ctypes.c_int32), "tile": (1, ctypes.c_uint32), "split_k": (2, ctypes.c_int32),
           "reduction": (3, ctypes.c_uint32), "swizzle": (4, ctypes.c_uint32), "custom": (5, ctypes.c_uint32),
           "stages": (6, ctypes.c_uint32), "inner": (7, ctypes.c_uint16), "cluster": (8, ctypes.c_uint16)}
_SPLITS = (2, 3, 4, 6, 8)
# Cluster shape ids to try (cublasLtClusterShape_t); AlgoCheck rejects what an algorithm cannot run.
_CLUSTER_IDS = range(0, 24)
_CUSTOM_LIMIT = 16


@dataclass(frozen=True)
class Config:
    """One algorithm's configuration, as cublasLtMatmulAlgoConfigGetAttribute reads it."""
    algo_id: int
    tile: int
    split_k: int
    reduction: int
    swizzle: int
    custom: int
    stages: int
    inner: int
    cluster: int


@dataclass(frozen=True)
class Space:
    """What one algorithm id supports."""
    tiles: tuple[int, ...]
    stages: tuple[int, ...]
    splits: bool
    reductions: tuple[int, ...]
    swizzle: bool
    custom_max: int


_spent_s = 0.0  # by this process's walks


def requested_s(rows: int) -> float:
    """Seconds asked for a walk over a shape of `rows` rows (0: keep the heuristic's list)."""
    return float(os.environ.get("VOXCPM_LT_SEARCH_S", DEFAULT_BUDGET_S)) if rows >= MIN_ROWS else 0.0


def budget_s(rows: int) -> float:
    """Seconds a walk over a shape of `rows` rows may take now: what is asked, within what is left of
    the process's VOXCPM_LT_SEARCH_TOTAL_S."""
    total = float(os.environ.get("VOXCPM_LT_SEARCH_TOTAL_S", DEFAULT_TOTAL_BUDGET_S))
    return max(0.0, min(requested_s(rows), total - _spent_s))


def _types(dtype: torch.dtype) -> tuple[int, ...]:
    data = lt_gemm._DATA_TYPES[dtype]
    return (lt_gemm._COMPUTE_32F, lt_gemm._R_32F, data, data, data, data)


def decode(algo: lt_gemm._Algo) -> Config:
    lib, values = lt_gemm._library(), {}
    for name, (attr, ctype) in _FIELDS.items():
        word, written = ctype(0), ctypes.c_size_t(0)
        lib.cublasLtMatmulAlgoConfigGetAttribute(ctypes.byref(algo), attr, ctypes.byref(word), ctypes.sizeof(word),
                                                 ctypes.byref(written))
        values[name] = int(word.value)
    return Config(**values)


def _init(algo_id: int, dtype: torch.dtype, device: torch.device) -> lt_gemm._Algo | None:
    """Algorithm `algo_id` in its default configuration, or None where cuBLASLt has no such id."""
    algo = lt_gemm._Algo()
    status = lt_gemm._library().cublasLtMatmulAlgoInit(lt_gemm._device(device).handle, *_types(dtype), algo_id,
                                                       ctypes.byref(algo))
    return algo if status == 0 else None


def build(config: Config, dtype: torch.dtype, device: torch.device) -> lt_gemm._Algo | None:
    """The algorithm of `config`, or None where cuBLASLt refuses a field."""
    algo, lib = _init(config.algo_id, dtype, device), lt_gemm._library()
    if algo is None:
        return None
    for name, (attr, ctype) in _FIELDS.items():
        word = ctype(getattr(config, name))
        if name != "algo_id" and lib.cublasLtMatmulAlgoConfigSetAttribute(ctypes.byref(algo), attr, ctypes.byref(word),
                                                                          ctypes.sizeof(word)) != 0:
            return None
    return algo


def check(plan: lt_gemm._Plan, algo: lt_gemm._Algo, device: torch.device) -> bool:
    """Whether cuBLASLt runs `algo` on the plan's shape within the workspace lt_gemm gives it."""
    result = lt_gemm._Heuristic()
    status = lt_gemm._library().cublasLtMatmulAlgoCheck(lt_gemm._device(device).handle, plan.desc, plan.w_layout,
                                                        plan.x_layout, plan.y_layout, plan.y_layout, ctypes.byref(algo),
                                                        ctypes.byref(result))
    return status == 0 and result.state == 0 and result.workspace_size <= lt_gemm.WORKSPACE_BYTES


def _cap_words(algo: lt_gemm._Algo, attr: int) -> tuple[int, ...]:
    lib, written = lt_gemm._library(), ctypes.c_size_t(0)
    lib.cublasLtMatmulAlgoCapGetAttribute(ctypes.byref(algo), attr, None, 0, ctypes.byref(written))
    if written.value < 4:
        return ()
    words = (ctypes.c_uint32 * (written.value // 4))()
    lib.cublasLtMatmulAlgoCapGetAttribute(ctypes.byref(algo), attr, words, ctypes.sizeof(words), ctypes.byref(written))
    return tuple(words)


def _cap_int(algo: lt_gemm._Algo, attr: int) -> int:
    word, written = ctypes.c_int32(0), ctypes.c_size_t(0)
    lt_gemm._library().cublasLtMatmulAlgoCapGetAttribute(ctypes.byref(algo), attr, ctypes.byref(word),
                                                         ctypes.sizeof(word), ctypes.byref(written))
    return int(word.value)


_spaces: dict[tuple[int, torch.dtype], Space | None] = {}


def space(algo_id: int, dtype: torch.dtype, device: torch.device) -> Space | None:
    key = (algo_id, dtype)
    if key not in _spaces:
        algo = _init(algo_id, dtype, device)
        if algo is None:
            _spaces[key] = None
        else:
            mask = _cap_int(algo, _CAP_REDUCTION_MASK)
            _spaces[key] = Space(_cap_words(algo, _CAP_TILE_IDS), _cap_words(algo, _CAP_STAGES_IDS),
                                 bool(_cap_int(algo, _CAP_SPLITK)), tuple(bit for bit in (1, 2, 4) if mask & bit),
                                 bool(_cap_int(algo, _CAP_SWIZZLE)),
                                 min(_cap_int(algo, _CAP_CUSTOM_MAX), _CUSTOM_LIMIT))
    return _spaces[key]


# The order walk changes fields in: the cheap few first, so the tiles are timed at their best.
FIELD_ORDER = ("cluster", "custom", "tile", "stages", "split_k", "swizzle")


def variants(config: Config, room: Space, field: str) -> list[Config]:
    """The configurations that differ from `config` in `field` alone (split-k with its reduction)."""
    if field == "cluster":
        out = [replace(config, cluster=c) for c in _CLUSTER_IDS]
    elif field == "custom":
        out = [replace(config, custom=c) for c in range(room.custom_max + 1)]
    elif field == "tile":
        out = [replace(config, tile=t) for t in room.tiles]
    elif field == "stages":
        out = [replace(config, stages=s) for s in room.stages]
    elif field == "split_k":
        out = [replace(config, split_k=1, reduction=0)] if room.splits else []
        out += [replace(config, split_k=s, reduction=r) for s in _SPLITS for r in room.reductions if room.splits]
    else:
        out = [replace(config, swizzle=s) for s in (0, 1)] if room.swizzle else []
    return [c for c in dict.fromkeys(out) if c != config]


def reclustered(config: Config) -> list[Config]:
    """`config` with each other cluster shape: what the walk times of a tile cuBLASLt refuses with
    the current one. Run 64's fastest down projection (tile 401, cluster id 2) is refused with the
    heuristic's cluster id 9, which stays the fastest cluster for the heuristic's own tile: from
    the heuristic's pick, neither a cluster move nor a tile move alone reaches it."""
    return [replace(config, cluster=c) for c in _CLUSTER_IDS if c != config.cluster]


def time_batch(calls: list[Callable[[], None]], repeats: int = CALLS_PER_CONFIG) -> list[float]:
    """Device us per call of each, all queued behind one sleeping kernel long enough for the host
    to queue them, with an event between consecutive candidates."""
    for call in calls:
        call()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(len(calls) + 1)]
    torch.cuda._sleep(len(calls) * repeats * LAUNCH_US * CYCLES_PER_US)
    events[0].record()
    for call, end in zip(calls, events[1:]):
        for _ in range(repeats):
            call()
        end.record()
    events[-1].synchronize()
    return [events[i].elapsed_time(events[i + 1]) * 1e3 / repeats for i in range(len(calls))]


def walk(plan: lt_gemm._Plan, starts: list[lt_gemm._Algo], runner: Callable[[lt_gemm._Algo], Callable[[], None]],
         dtype: torch.dtype, device: torch.device, seconds: float) -> list[lt_gemm._Algo]:
    """Up to FINALISTS algorithms, fastest first, among `starts` and the valid configurations the
    walk times within `seconds`. runner(algo) gives a call that runs algo once on the shape's
    operands. From the fastest configuration not walked from yet, the walk goes field by field
    (FIELD_ORDER): it times every valid value of the field and moves to the fastest before the next
    field, so one pass can change several fields, as the best configurations of run 64 needed. A
    tile refused with the current cluster shape is tried with every other (`reclustered`)."""
    deadline = time.monotonic() + seconds
    times: dict[Config, float] = {}
    algos: dict[Config, lt_gemm._Algo] = {}

    def measure(configs: list[Config]) -> None:
        for first in range(0, len(configs), BATCH):
            if time.monotonic() >= deadline:
                return
            batch = configs[first:first + BATCH]
            try:
                timed = time_batch([runner(algos[c]) for c in batch])
            except lt_gemm.LtError:
                # A configuration AlgoCheck passed that cublasLtMatmul refuses: time the batch one
                # by one, leaving out whichever raises, rather than fail the graph's warm-up.
                timed = []
                for config in batch:
                    try:
                        timed += time_batch([runner(algos[config])])
                    except lt_gemm.LtError:
                        timed.append(float("inf"))
            for config, us in zip(batch, timed):
                if us != float("inf"):
                    times[config] = us

    for algo in starts:
        algos.setdefault(decode(algo), algo)
    measure(list(algos))
    walked: set[Config] = set()
    while time.monotonic() < deadline:
        fresh = [c for c in sorted(times, key=times.get) if c not in walked]
        if not fresh:
            break
        current = fresh[0]
        walked.add(current)
        room = space(current.algo_id, dtype, device)
        if room is None:
            continue
        for field in FIELD_ORDER:
            neighbours = variants(current, room, field)
            found = []
            for config in neighbours:  # grows while it is walked: a tile's other cluster shapes
                if time.monotonic() >= deadline:
                    break
                if config not in algos:
                    algo = build(config, dtype, device)
                    if algo is None or not check(plan, algo, device):
                        if field == "tile" and config.cluster == current.cluster:
                            neighbours += reclustered(config)
                        continue
                    algos[config] = algo
                    found.append(config)
            measure(found)
            current = min((c for c in [current, *neighbours] if c in times), key=times.get)
    global _spent_s
    _spent_s += seconds - max(0.0, deadline - time.monotonic())
    ranked = sorted(times, key=lambda c: (times[c], astuple(c)))
    return [algos[c] for c in ranked[:FINALISTS]]
