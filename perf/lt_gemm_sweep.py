"""Every cuBLASLt candidate against F.linear on the decoder step's GEMM shapes of many rows.

    python -m perf.lt_gemm_sweep [--streams 4,16,64,256] [--out sweep.md] [--candidates 16]

Prints, per (rows, GEMM), F.linear's time, the heuristic's first choice and the fastest candidate
(us per call, back to back on one stream; the weight stays in L2 where it fits, as it does not in
the step, so weight-bound rows read a little fast), and what lt_gemm.linear would choose. The
shapes are VoxCPM2's: LocDiT rows are 2 CFG branches x 11 tokens per stream, LM rows one per stream.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from perf.cuda_required import cuda_missing
from voxcpm_triton.ops import lt_gemm

# name -> (k, n) of y = x [rows, k] @ w [n, k]^T
LOCDIT = {"dit qkv": (1024, 2560), "dit o_proj": (2048, 1024), "dit gate_up": (1024, 8192),
          "dit down": (4096, 1024)}
LM = {"lm qkv": (2048, 2560), "lm o_proj": (2048, 2048), "lm gate_up": (2048, 12288), "lm down": (6144, 2048)}


def shapes(streams: list[int]) -> list[tuple[int, str, int, int]]:
    out = []
    for b in streams:
        out += [(b, name, k, n) for name, (k, n) in LM.items()]
        out += [(22 * b, name, k, n) for name, (k, n) in LOCDIT.items()]
    return out


def sweep(streams: list[int]) -> list[str]:
    lines = ["| rows | GEMM | F.linear us | heuristic #0 us | fastest us (index of) | TFLOP/s F.linear -> fastest |"
             " chosen |", "|---|---|---|---|---|---|---|"]
    torch.manual_seed(0)
    for rows, name, k, n in shapes(streams):
        x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
        base = lt_gemm.time_call(lambda: F.linear(x, w)) * 1e3
        plan, algos = lt_gemm.candidates(x, w, None)
        times = []
        for algo in algos:
            try:
                times.append(lt_gemm.time_call(lambda: lt_gemm.run_algo(plan, algo, x, w)) * 1e3)
            except lt_gemm.LtError:
                times.append(float("inf"))
        with lt_gemm.tuning():
            lt_gemm.linear(x, w)
        flops = 2 * rows * k * n
        best = min(range(len(times)), key=times.__getitem__) if times else None
        first = f"{times[0]:.1f}" if times else "-"
        fastest = f"{times[best]:.1f} (#{best} of {len(times)})" if times else "-"
        tflops = f"{flops / base / 1e6:.0f} -> {flops / min(times + [base]) / 1e6:.0f}"
        lines.append(f"| {rows} | {name} | {base:.1f} | {first} | {fastest} | {tflops} | "
                     f"{lt_gemm.choice(x, w)} |")
        print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="4,16,64,256", help="stream counts; LocDiT rows are 22 per stream")
    parser.add_argument("--out", default=None, help="also write the table here")
    parser.add_argument("--candidates", type=int, default=lt_gemm.CANDIDATES,
                        help="heuristic results asked for per shape (lt_gemm.CANDIDATES unless given)")
    args = parser.parse_args()
    if cuda_missing("lt_gemm_sweep"):
        raise SystemExit(2)
    lt_gemm.CANDIDATES = args.candidates
    lines = sweep([int(b) for b in args.streams.split(",")])
    if args.out:
        with open(args.out, "w") as fh:
            fh.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
