"""cuBLASLt configurations beyond the heuristic's list, on the step's GEMM shapes of many rows.

    python -m perf.lt_config_search [--streams 64,256] [--budget-s 30] [--out search.md] [--json search.json]

lt_gemm times the algorithms cuBLASLt's heuristic offers per shape (at most 8 for these, run 63).
cuBLASLt also lets a caller build an algorithm: an algorithm id (cublasLtMatmulAlgoInit), then a
tile, stage count, split-k and reduction scheme, swizzle, custom option and cluster shape among
what that id supports (cublasLtMatmulAlgoCapGetAttribute), validated by cublasLtMatmulAlgoCheck.
This walks that space from each heuristic pick: every configuration one field away, timed, then
again from the best ones found, until a shape's time budget is spent. Per shape it prints the
heuristic's fastest against the fastest configuration found, both decoded. o_proj and down are
timed as the step runs them: adding into the residual stream (beta = 1).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import time
from dataclasses import astuple, dataclass, fields, replace

import torch
import torch.nn.functional as F

from voxcpm_triton.ops import lt_gemm

# name -> (k, n, adds into its output) of y = x [rows, k] @ w [n, k]^T
LOCDIT = {"dit qkv": (1024, 2560, False), "dit o_proj": (2048, 1024, True), "dit gate_up": (1024, 8192, False),
          "dit down": (4096, 1024, True)}
LM = {"lm qkv": (2048, 2560, False), "lm o_proj": (2048, 2048, False), "lm gate_up": (2048, 12288, False),
      "lm down": (6144, 2048, False)}

# cublasLt.h enum values
_CAP_SPLITK, _CAP_REDUCTION_MASK, _CAP_SWIZZLE, _CAP_TILE_IDS, _CAP_CUSTOM_MAX, _CAP_STAGES_IDS = 0, 1, 2, 6, 7, 13
_CFG = {"algo_id": (0, ctypes.c_int32), "tile": (1, ctypes.c_uint32), "split_k": (2, ctypes.c_int32),
        "reduction": (3, ctypes.c_uint32), "swizzle": (4, ctypes.c_uint32), "custom": (5, ctypes.c_uint32),
        "stages": (6, ctypes.c_uint32), "inner": (7, ctypes.c_uint16), "cluster": (8, ctypes.c_uint16)}
_SPLITS = (1, 2, 3, 4, 6, 8)
_CLUSTER_IDS = range(0, 24)  # AlgoCheck rejects the ones an algorithm cannot run
_CUSTOM_LIMIT = 16
TIMED_CALLS = 20


@dataclass(frozen=True)
class Config:
    algo_id: int
    tile: int
    split_k: int
    reduction: int
    swizzle: int
    custom: int
    stages: int
    inner: int
    cluster: int


def _declare(lib: ctypes.CDLL) -> None:
    p, i32, size = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    for name, argtypes in {
        "cublasLtMatmulAlgoGetIds": [p, i32, i32, i32, i32, i32, i32, i32, p, p],
        "cublasLtMatmulAlgoInit": [p, i32, i32, i32, i32, i32, i32, i32, p],
        "cublasLtMatmulAlgoCapGetAttribute": [p, i32, p, size, p],
        "cublasLtMatmulAlgoConfigSetAttribute": [p, i32, p, size],
        "cublasLtMatmulAlgoConfigGetAttribute": [p, i32, p, size, p],
        "cublasLtMatmulAlgoCheck": [p, p, p, p, p, p, p, p],
    }.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, ctypes.c_int


def decode(algo: lt_gemm._Algo) -> Config:
    lib, values = lt_gemm._library(), {}
    for name, (attr, ctype) in _CFG.items():
        word, written = ctype(0), ctypes.c_size_t(0)
        lib.cublasLtMatmulAlgoConfigGetAttribute(ctypes.byref(algo), attr, ctypes.byref(word), ctypes.sizeof(word),
                                                 ctypes.byref(written))
        values[name] = int(word.value)
    return Config(**values)


def _types(dtype: torch.dtype) -> tuple[int, ...]:
    data = lt_gemm._DATA_TYPES[dtype]
    return (lt_gemm._COMPUTE_32F, lt_gemm._R_32F, data, data, data, data)


def build(config: Config, dtype: torch.dtype) -> lt_gemm._Algo | None:
    lib, handle = lt_gemm._library(), lt_gemm._device(torch.device("cuda")).handle
    algo = lt_gemm._Algo()
    if lib.cublasLtMatmulAlgoInit(handle, *_types(dtype), config.algo_id, ctypes.byref(algo)) != 0:
        return None
    for name, (attr, ctype) in _CFG.items():
        if name == "algo_id":
            continue
        word = ctype(getattr(config, name))
        if lib.cublasLtMatmulAlgoConfigSetAttribute(ctypes.byref(algo), attr, ctypes.byref(word),
                                                    ctypes.sizeof(word)) != 0:
            return None
    return algo


def _cap_list(algo: lt_gemm._Algo, attr: int) -> list[int]:
    lib, written = lt_gemm._library(), ctypes.c_size_t(0)
    lib.cublasLtMatmulAlgoCapGetAttribute(ctypes.byref(algo), attr, None, 0, ctypes.byref(written))
    count = written.value // 4
    if count == 0:
        return []
    words = (ctypes.c_uint32 * count)()
    lib.cublasLtMatmulAlgoCapGetAttribute(ctypes.byref(algo), attr, words, ctypes.sizeof(words), ctypes.byref(written))
    return list(words)


def _cap_int(algo: lt_gemm._Algo, attr: int) -> int:
    word, written = ctypes.c_int32(0), ctypes.c_size_t(0)
    lt_gemm._library().cublasLtMatmulAlgoCapGetAttribute(ctypes.byref(algo), attr, ctypes.byref(word),
                                                        ctypes.sizeof(word), ctypes.byref(written))
    return int(word.value)


@dataclass
class Space:
    """What one algorithm id supports."""
    tiles: list[int]
    stages: list[int]
    splits: bool
    reductions: list[int]
    swizzle: bool
    custom_max: int


def space(algo_id: int, dtype: torch.dtype, cache: dict[int, Space]) -> Space | None:
    if algo_id not in cache:
        algo = lt_gemm._Algo()
        lib, handle = lt_gemm._library(), lt_gemm._device(torch.device("cuda")).handle
        if lib.cublasLtMatmulAlgoInit(handle, *_types(dtype), algo_id, ctypes.byref(algo)) != 0:
            return None
        mask = _cap_int(algo, _CAP_REDUCTION_MASK)
        cache[algo_id] = Space(_cap_list(algo, _CAP_TILE_IDS), _cap_list(algo, _CAP_STAGES_IDS),
                               bool(_cap_int(algo, _CAP_SPLITK)), [bit for bit in (1, 2, 4) if mask & bit],
                               bool(_cap_int(algo, _CAP_SWIZZLE)), min(_cap_int(algo, _CAP_CUSTOM_MAX), _CUSTOM_LIMIT))
    return cache[algo_id]


def neighbours(config: Config, room: Space) -> list[Config]:
    """Every configuration that differs from `config` in one field (split-k and its reduction
    scheme count as one)."""
    out = [replace(config, tile=t) for t in room.tiles]
    out += [replace(config, stages=s) for s in room.stages]
    if room.splits:
        out += [replace(config, split_k=1, reduction=0)]
        out += [replace(config, split_k=s, reduction=r) for s in _SPLITS[1:] for r in room.reductions]
    if room.swizzle:
        out += [replace(config, swizzle=s) for s in (0, 1)]
    out += [replace(config, custom=c) for c in range(room.custom_max + 1)]
    out += [replace(config, cluster=c) for c in _CLUSTER_IDS]
    return [c for c in out if c != config]


def check(plan: lt_gemm._Plan, algo: lt_gemm._Algo) -> bool:
    result = lt_gemm._Heuristic()
    handle = lt_gemm._device(torch.device("cuda")).handle
    status = lt_gemm._library().cublasLtMatmulAlgoCheck(handle, plan.desc, plan.w_layout, plan.x_layout, plan.y_layout,
                                                       plan.y_layout, ctypes.byref(algo), ctypes.byref(result))
    return status == 0 and result.state == 0 and result.workspace_size <= lt_gemm.WORKSPACE_BYTES


class Shape:
    """One GEMM's operands and how to time and check a configuration on it."""

    def __init__(self, rows: int, k: int, n: int, adds: bool):
        self.adds = adds
        self.x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
        self.w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
        self.base = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
        self.out = torch.empty_like(self.base)
        expected = F.linear(self.x, self.w).float() + (self.base.float() if adds else 0)
        self.expected, self.scale = expected, expected.abs().max().item() + 1e-6
        self.plan = lt_gemm._make_plan(self.x, self.w, None)

    def run(self, algo: lt_gemm._Algo) -> None:
        lt_gemm._run(self.plan, algo, self.x, self.w, None, self.out, 1.0, 1.0 if self.adds else 0.0)

    def correct(self, algo: lt_gemm._Algo) -> bool:
        self.out.copy_(self.base)
        self.run(algo)
        torch.cuda.synchronize()
        return (self.out.float() - self.expected).abs().max().item() <= 2e-2 * self.scale

    def time_us(self, algo: lt_gemm._Algo) -> float:
        return lt_gemm.time_call(lambda: self.run(algo), TIMED_CALLS) * 1e3

    def torch_us(self) -> float:
        if self.adds:
            return lt_gemm.time_call(lambda: self.out.add_(F.linear(self.x, self.w)), TIMED_CALLS) * 1e3
        return lt_gemm.time_call(lambda: F.linear(self.x, self.w), TIMED_CALLS) * 1e3


def search(shape: Shape, budget_s: float, extra_ids: list[int]) -> dict:
    dtype, caps = shape.x.dtype, {}
    _, heuristic = lt_gemm.candidates(shape.x, shape.w, None)
    timed: dict[Config, float] = {}
    rejected = 0

    def measure(config: Config) -> None:
        nonlocal rejected
        if config in timed:
            return
        algo = build(config, dtype)
        if algo is None or not check(shape.plan, algo):
            timed[config] = float("inf")
            return
        try:
            ok = shape.correct(algo)
        except lt_gemm.LtError:
            ok = False
        if not ok:
            rejected += 1
            timed[config] = float("inf")
            return
        timed[config] = shape.time_us(algo)

    starts = [decode(algo) for algo in heuristic]
    for config in starts:
        measure(config)
    heuristic_times = [timed[c] for c in starts]
    # Algorithm ids the heuristic did not offer, in their default configuration first.
    for algo_id in extra_ids:
        if algo_id not in {c.algo_id for c in starts} and space(algo_id, dtype, caps) is not None:
            blank = Config(algo_id, 0, 1, 0, 0, 0, 0, 0, 0)
            starts.append(blank)
            measure(blank)
    deadline = time.monotonic() + budget_s
    frontier, seen_starts = list(starts), set()
    while frontier and time.monotonic() < deadline:
        config = frontier.pop(0)
        if config in seen_starts:
            continue
        seen_starts.add(config)
        room = space(config.algo_id, dtype, caps)
        if room is None:
            continue
        for other in neighbours(config, room):
            if time.monotonic() >= deadline:
                break
            measure(other)
        # Walk on from the three fastest configurations not walked from yet.
        ranked = sorted((t, astuple(c), c) for c, t in timed.items() if t < float("inf") and c not in seen_starts)
        frontier = [c for _, _, c in ranked[:3]] + [c for c in frontier if c not in {r[2] for r in ranked[:3]}]
    valid = {c: t for c, t in timed.items() if t < float("inf")}
    best = min(valid, key=valid.get) if valid else None
    best_heuristic = min(range(len(heuristic_times)), key=heuristic_times.__getitem__) if heuristic_times else None
    return {
        "torch_us": shape.torch_us(),
        "heuristic": [(astuple(c), t) for c, t in zip(starts[:len(heuristic_times)], heuristic_times)],
        "heuristic_best_us": heuristic_times[best_heuristic] if best_heuristic is not None else None,
        "best": (astuple(best), valid[best]) if best else None,
        "valid": len(valid), "tried": len(timed), "wrong": rejected,
        "top": sorted(((t, astuple(c)) for c, t in valid.items()))[:8],
        "algo_ids_walked": sorted({c.algo_id for c in seen_starts}),
    }


def algo_ids(dtype: torch.dtype) -> list[int]:
    lib, handle = lt_gemm._library(), lt_gemm._device(torch.device("cuda")).handle
    ids, count = (ctypes.c_int * 256)(), ctypes.c_int(0)
    lib.cublasLtMatmulAlgoGetIds(handle, *_types(dtype), 256, ids, ctypes.byref(count))
    return list(ids[:count.value])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="64,256")
    parser.add_argument("--budget-s", type=float, default=30.0, help="search time per shape")
    parser.add_argument("--only", default="", help="comma-separated GEMM names (default: all)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    _declare(lt_gemm._library())
    torch.manual_seed(0)
    ids = algo_ids(torch.bfloat16)
    print(f"cuBLASLt {lt_gemm._library()._name}: algorithm ids {ids}", flush=True)
    print(f"config fields: {[f.name for f in fields(Config)]}", flush=True)
    only = set(filter(None, args.only.split(",")))
    lines = ["| rows | GEMM | torch us | heuristic best us (of n) | found best us | gain | tried / valid / wrong |"
             " heuristic best config | found config |", "|---|---|---|---|---|---|---|---|---|"]
    report = {}
    for streams in [int(s) for s in args.streams.split(",")]:
        for rows, table in ((streams, LM), (22 * streams, LOCDIT)):
            for name, (k, n, adds) in table.items():
                if only and name not in only:
                    continue
                result = search(Shape(rows, k, n, adds), args.budget_s, ids)
                report[f"{rows} {name}"] = result
                hb, best = result["heuristic_best_us"], result["best"]
                h_config = min(result["heuristic"], key=lambda item: item[1])[0] if result["heuristic"] else "-"
                gain = f"{(1 - best[1] / hb) * 100:+.1f}%" if hb and best else "-"
                lines.append(f"| {rows} | {name} | {result['torch_us']:.1f} | "
                             f"{hb:.1f} ({len(result['heuristic'])}) | {best[1]:.1f} | {gain} | "
                             f"{result['tried']} / {result['valid']} / {result['wrong']} | {h_config} | {best[0]} |")
                print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write("\n".join(lines) + "\n")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main()
