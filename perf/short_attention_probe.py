"""Runs short_attention alone on the LocDiT's shape (VoxCPM2: 16 query heads, 2 KV heads, 128
dims), with its row scales as the engine passes them, for ncu or for a kernel A/B of two libraries
(VOXCPM_KERNELS_LIB), since the step's figure moves too little to see a change in one kernel.

    python perf/short_attention_probe.py --sequences 128 --scales given --time   # us per call
    python perf/short_attention_probe.py --cases 128:input,2:input --time         # several, one process
    python perf/short_attention_probe.py --fastest probe.txt --among tok,tok2      # the faster library
    ncu --clock-control none -k regex:short_attention --launch-skip 2 --launch-count 1 --set full \\
        python perf/short_attention_probe.py --sequences 128 --scales given

The engine runs the LocDiT as 2 sequences of 11 tokens a stream (both CFG branches), with the input
norm's statistic computed in the kernel (`input`) up to minicpm.ATTENTION_STATISTIC_MAX_ROWS rows
(2048: 64 streams' 1408 included), given by ops.row_scale (`given`) above.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from perf.bench_ops import graph_time_us, rand, rope_tables  # noqa: E402
from perf.cuda_required import cuda_missing  # noqa: E402
from voxcpm_triton import ops  # noqa: E402

Q_HEADS, KV_HEADS, HEAD_DIM, HIDDEN = 16, 2, 128, 1024
SCALES = ("none", "given", "input")


def run_case(sequences: int, seq_len: int, scales: str, launches: int, time_it: bool) -> None:
    tokens = sequences * seq_len
    qkv = rand(tokens, (Q_HEADS + 2 * KV_HEADS) * HEAD_DIM, dtype=torch.bfloat16)
    cos, sin = rope_tables(seq_len, HEAD_DIM)
    x = rand(tokens, HIDDEN, dtype=torch.bfloat16)
    row_scale = ops.row_scale(x, 1e-5) if scales == "given" else None
    norm_input = x if scales == "input" else None

    def call() -> torch.Tensor:
        return ops.short_attention(qkv, seq_len, Q_HEADS, KV_HEADS, cos, sin, row_scale=row_scale,
                                   norm_input=norm_input, norm_eps=1e-5)

    for _ in range(launches):
        call()
    torch.cuda.synchronize()
    if time_it:
        us = graph_time_us(call, inner=50, reps=40)
        print(f"short_attention sequences={sequences} seq_len={seq_len} scales={scales}: {us:.2f} us")


def fastest(lines: list[str], among: list[str], case: str = "128:input") -> str:
    """The variant with the lowest time for `case` (SEQUENCES:SCALES) in a device call's probe output:
    --time lines, each prefixed with its variant (library) name; the best of its repeats counts."""
    sequences, scales = case.split(":")
    best: dict[str, float] = {}
    for line in lines:
        parts = line.split()
        if (len(parts) > 3 and parts[0] in among and f"sequences={sequences}" in parts
                and f"scales={scales}:" in parts):
            best[parts[0]] = min(best.get(parts[0], float("inf")), float(parts[-2]))
    if not best:
        raise SystemExit(f"no {case} time for any of {among}")
    return min(best, key=best.__getitem__)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sequences", type=int, default=128)
    parser.add_argument("--seq-len", type=int, default=11)
    parser.add_argument("--scales", choices=SCALES, default="given")
    parser.add_argument("--cases", default="",
                        help="instead of the three above: SEQUENCES:SCALES,... (each at --seq-len), one process")
    parser.add_argument("--launches", type=int, default=4, help="eager launches (for ncu to pick from)")
    parser.add_argument("--time", action="store_true", help="print the graph-replayed time per call")
    parser.add_argument("--fastest", type=Path, help="instead: print which of --among is fastest in this "
                        "file of --time lines prefixed with variant names")
    parser.add_argument("--among", default="", help="variant names for --fastest, comma-separated")
    parser.add_argument("--case", default="128:input", help="SEQUENCES:SCALES that --fastest compares")
    args = parser.parse_args()
    if args.fastest:
        print(fastest(args.fastest.read_text().splitlines(), args.among.split(","), args.case))
        return
    if cuda_missing("short_attention_probe"):
        raise SystemExit(2)
    cases = [(args.sequences, args.scales)]
    if args.cases:
        cases = [(int(n), kind) for n, kind in (c.split(":") for c in args.cases.split(","))]
        for _, kind in cases:
            if kind not in SCALES:
                parser.error(f"scales must be one of {SCALES}, got {kind!r}")
    for sequences, scales in cases:
        run_case(sequences, args.seq_len, scales, args.launches, args.time)


if __name__ == "__main__":
    main()
