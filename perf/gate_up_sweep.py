"""The gate_up GEMM + SwiGLU as cuBLAS(Lt) then the swiglu op, against the CUTLASS kernel that applies
SwiGLU in its epilogue (ops.gate_up_sm90), per schedule, on the LocDiT's shapes of many rows.

    python -m perf.gate_up_sweep [--streams 24,64,128,256] [--out sweep.md]

Prints us per call (back to back on one stream, GPU time only: lt_gemm.time_call), the GEMM and
swiglu parts of the unfused path, the TFLOP/s of the gate_up product each way, and what
gate_up_sm90.gate_up_swiglu chooses. LocDiT rows are 2 CFG branches x 11 tokens per stream.
"""

from __future__ import annotations

import argparse

import torch

from perf.cuda_required import cuda_missing
from voxcpm_triton.ops import gate_up_sm90, lt_gemm
from voxcpm_triton.ops.swiglu import swiglu

LOCDIT_K, LOCDIT_INTER = 1024, 4096
ROWS_PER_STREAM = 22


def sweep(streams: list[int]) -> list[str]:
    names = list(gate_up_sm90.SCHEDULES)
    lines = ["| streams | rows | GEMM us | swiglu us | unfused us | " + " | ".join(f"{n} us" for n in names)
             + " | TFLOP/s unfused -> best fused | chosen |",
             "|---" * (6 + len(names)) + "|---|"]
    torch.manual_seed(0)
    for b in streams:
        rows = ROWS_PER_STREAM * b
        x = torch.randn(rows, LOCDIT_K, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(2 * LOCDIT_INTER, LOCDIT_K, device="cuda", dtype=torch.bfloat16) / LOCDIT_K ** 0.5
        interleaved = gate_up_sm90.interleave(w)
        with lt_gemm.tuning():
            product = lt_gemm.linear(x, w)
            gate_up_sm90.gate_up_swiglu(x, w, interleaved)
        gemm = lt_gemm.time_call(lambda: lt_gemm.linear(x, w)) * 1e3
        act = lt_gemm.time_call(lambda: swiglu(product)) * 1e3
        unfused = lt_gemm.time_call(lambda: swiglu(lt_gemm.linear(x, w))) * 1e3
        fused = [lt_gemm.time_call(lambda: gate_up_sm90.fused(x, interleaved, s)) * 1e3
                 for s in gate_up_sm90.SCHEDULES.values()]
        flop = 2 * rows * LOCDIT_K * 2 * LOCDIT_INTER
        tflops = f"{flop / unfused / 1e6:.0f} -> {flop / min(fused) / 1e6:.0f}"
        cells = [str(b), str(rows), f"{gemm:.1f}", f"{act:.1f}", f"{unfused:.1f}", *(f"{t:.1f}" for t in fused),
                 tflops, gate_up_sm90.choice(x, w, interleaved)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", default="24,64,128,256")
    parser.add_argument("--out", default=None, help="also write the table here")
    args = parser.parse_args()
    if cuda_missing("gate_up_sweep"):
        raise SystemExit(2)
    if not gate_up_sm90.available(torch.empty(gate_up_sm90.WEIGHT_ROWS, 8, device="cuda", dtype=torch.bfloat16)):
        raise SystemExit("gate_up_sm90 does not run here (needs sm_90 and a kernels library built with CUTLASS)")
    text = "\n".join(sweep([int(s) for s in args.streams.split(",")]))
    print(text)
    if args.out:
        with open(args.out, "w") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
