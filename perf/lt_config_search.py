"""cuBLASLt configurations beyond the heuristic's list, on the step's GEMM shapes of many rows.

    python -m perf.lt_config_search [--streams 64,256] [--budget-s 30] [--only "dit down,..."] [--out search.md]
        [--cache build/out/lt_cache.json]

Per shape: the heuristic's algorithms and lt_search.walk's finalists after a walk of --budget-s
seconds (lt_gemm gives it VOXCPM_LT_SEARCH_S while a graph warms up), each timed back to back, and
both fastest configurations decoded (algo id, tile, split-k, reduction, swizzle, custom option,
stages, inner shape, cluster shape). o_proj and down are timed as the step runs them: added into
the residual stream (beta = 1). --cache writes each walk's finalists into that lt_cache file under
the key the engine looks up, with the walk's budget: a decoder that later starts with that file (the
ar_decoder's `lt_cache` parameter) reuses this long search instead of its own 0.5 s walk.
"""

from __future__ import annotations

import argparse
import functools
import os
import time
from dataclasses import astuple

import torch
import torch.nn.functional as F

from perf.cuda_required import cuda_missing
from voxcpm_triton.ops import lt_cache, lt_gemm, lt_search

# name -> (k, n, adds into its output) of y = x [rows, k] @ w [n, k]^T
LOCDIT = {"dit qkv": (1024, 2560, False), "dit o_proj": (2048, 1024, True), "dit gate_up": (1024, 8192, False),
          "dit down": (4096, 1024, True)}
LM = {"lm qkv": (2048, 2560, False), "lm o_proj": (2048, 2048, False), "lm gate_up": (2048, 12288, False),
      "lm down": (6144, 2048, False)}


def compare(rows: int, k: int, n: int, adds: bool, budget_s: float) -> str:
    x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
    out = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
    plan, heuristic = lt_gemm.candidates(x, w, None)
    call = (functools.partial(lt_gemm._accumulate, plan, x=x, weight=w, out=out, scale=1.0) if adds
            else functools.partial(lt_gemm.run_algo, plan, x=x, weight=w, out=out))

    def runner(algo):
        return functools.partial(call, algo=algo)

    def fastest(algos):
        return min((lt_gemm.time_call(runner(a)) * 1e3, astuple(lt_search.decode(a))) for a in algos)

    start = time.monotonic()
    found = lt_search.walk(plan, heuristic, runner, x.dtype, x.device, budget_s)
    walked_s = time.monotonic() - start
    key = lt_gemm._add_key(x, w) if adds else lt_gemm._key(x, w, None)
    # A no-op without --cache: lt_cache.path() is then None.
    lt_cache.record(x.device, key, lt_cache.Entry(budget_s, tuple(map(lt_search.decode, found))))
    torch_us = lt_gemm.time_call((lambda: out.add_(F.linear(x, w))) if adds else (lambda: F.linear(x, w))) * 1e3
    h_us, h_config = fastest(heuristic)
    f_us, f_config = fastest(found)
    return (f"| {rows} | {torch_us:.1f} | {h_us:.1f} ({len(heuristic)}) | {f_us:.1f} | {(1 - f_us / h_us) * 100:+.1f}% |"
            f" {walked_s:.1f} | {h_config} | {f_config} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--streams", default="64,256")
    parser.add_argument("--budget-s", type=float, default=30.0, help="walk time per shape")
    parser.add_argument("--only", default="", help="comma-separated GEMM names (default: all)")
    parser.add_argument("--out", default=None)
    parser.add_argument("--cache", default=None, help="lt_cache file to write the finalists into")
    args = parser.parse_args()
    if cuda_missing("lt_config_search"):
        raise SystemExit(2)
    if args.cache:
        os.environ[lt_cache.ENV] = args.cache
    else:
        os.environ.pop(lt_cache.ENV, None)  # a search without --cache leaves every cache file alone
    torch.manual_seed(0)
    only = set(filter(None, args.only.split(",")))
    lines = ["| GEMM | rows | torch us | heuristic best us (of n) | found best us | gain | walk s | heuristic config |"
             " found config |", "|---|---|---|---|---|---|---|---|---|"]
    for streams in [int(s) for s in args.streams.split(",")]:
        for rows, table in ((streams, LM), (22 * streams, LOCDIT)):
            for name, (k, n, adds) in table.items():
                if not only or name in only:
                    lines.append(f"| {name} " + compare(rows, k, n, adds, args.budget_s))
                    print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
