"""Run 118's probe: one of the LocDiT's skinny GEMMs at a given row count, called a few times
eagerly, for ncu to profile one call of (the per-instruction stall samples of one, two and three
8-row tiles). Run 116 found each further tile costs ~1 us a call in a chain, also from one tile to
two, where a warp keeps four chunks of weights in flight either way: not only the second round.

    python tile_probe.py {qkv,gate_up,down} ROWS
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from perf.bench_ops import rand  # noqa: E402
from voxcpm_triton import ops  # noqa: E402

HIDDEN, QKV, INTER = 1024, (16 + 2 * 2) * 128, 4096


def main(gemm: str, rows: int) -> None:
    x = rand(rows, HIDDEN, dtype=torch.bfloat16)
    gain = rand(HIDDEN, dtype=torch.bfloat16)
    if gemm == "qkv":
        w = rand(QKV, HIDDEN, dtype=torch.bfloat16) / 32
        call = lambda: ops.normed_linear(x, w, gain, 1e-5)  # noqa: E731
    elif gemm == "gate_up":
        w = rand(2 * INTER, HIDDEN, dtype=torch.bfloat16) / 32
        call = lambda: ops.normed_gate_up_swiglu(x, w, gain, 1e-5)  # noqa: E731
    else:
        h, residual = rand(rows, INTER, dtype=torch.bfloat16), rand(rows, HIDDEN, dtype=torch.bfloat16)
        w = rand(HIDDEN, INTER, dtype=torch.bfloat16) / 64
        call = lambda: ops.linear_residual_(h, w, residual, 1.0)  # noqa: E731
    for _ in range(4):
        call()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
