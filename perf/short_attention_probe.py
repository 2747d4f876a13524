"""Runs short_attention alone on the LocDiT's shape (VoxCPM2: 16 query heads, 2 KV heads, 128
dims), with its row scales as the engine passes them, for ncu or for a kernel A/B of two libraries
(VOXCPM_KERNELS_LIB), since the step's figure moves too little to see a change in one kernel.

    python perf/short_attention_probe.py --sequences 128 --scales given --time   # us per call
    ncu --clock-control none -k regex:short_attention --launch-skip 2 --launch-count 1 --set full \\
        python perf/short_attention_probe.py --sequences 128 --scales given

64 streams run the LocDiT as 128 sequences of 11 tokens (both CFG branches) with the input norm's
statistic given (`given`, ops.row_scale's, above fast_path's ATTENTION_STATISTIC_MAX_ROWS); one
stream as 2 sequences with the statistic computed in the kernel (`input`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from perf.bench_ops import graph_time_us, rand, rope_tables  # noqa: E402
from voxcpm_triton import ops  # noqa: E402

Q_HEADS, KV_HEADS, HEAD_DIM, HIDDEN = 16, 2, 128, 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sequences", type=int, default=128)
    parser.add_argument("--seq-len", type=int, default=11)
    parser.add_argument("--scales", choices=("none", "given", "input"), default="given")
    parser.add_argument("--launches", type=int, default=4, help="eager launches (for ncu to pick from)")
    parser.add_argument("--time", action="store_true", help="print the graph-replayed time per call")
    args = parser.parse_args()

    tokens = args.sequences * args.seq_len
    qkv = rand(tokens, (Q_HEADS + 2 * KV_HEADS) * HEAD_DIM, dtype=torch.bfloat16)
    cos, sin = rope_tables(args.seq_len, HEAD_DIM)
    x = rand(tokens, HIDDEN, dtype=torch.bfloat16)
    row_scale = ops.row_scale(x, 1e-5) if args.scales == "given" else None
    norm_input = x if args.scales == "input" else None

    def call() -> torch.Tensor:
        return ops.short_attention(qkv, args.seq_len, Q_HEADS, KV_HEADS, cos, sin, row_scale=row_scale,
                                   norm_input=norm_input, norm_eps=1e-5)

    for _ in range(args.launches):
        call()
    torch.cuda.synchronize()
    if args.time:
        us = graph_time_us(call, inner=50, reps=40)
        print(f"short_attention sequences={args.sequences} seq_len={args.seq_len} scales={args.scales}: {us:.2f} us")


if __name__ == "__main__":
    main()
