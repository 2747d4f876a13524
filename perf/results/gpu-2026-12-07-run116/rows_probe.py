"""Run 116's probe: us per call of the LocDiT's skinny GEMMs at one stream's shapes as the row count
crosses 16 (two 8-row tiles: four chunks of weights in flight a warp) to 17 (three tiles: two in
flight), each repeated in one CUDA graph so that every call waits for the one before, as in the step.
Main's code and library."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from perf.bench_ops import graph_time_us, rand  # noqa: E402
from voxcpm_triton import ops  # noqa: E402

HIDDEN, QKV, INTER = 1024, (16 + 2 * 2) * 128, 4096
w_qkv = rand(QKV, HIDDEN, dtype=torch.bfloat16) / 32
w_gate_up = rand(2 * INTER, HIDDEN, dtype=torch.bfloat16) / 32
w_down = rand(HIDDEN, INTER, dtype=torch.bfloat16) / 64
gain = rand(HIDDEN, dtype=torch.bfloat16)
for rows in (8, 11, 16, 17, 22, 24):
    x = rand(rows, HIDDEN, dtype=torch.bfloat16)
    h = rand(rows, INTER, dtype=torch.bfloat16)
    residual = rand(rows, HIDDEN, dtype=torch.bfloat16)
    cases = {
        "qkv normed_linear": lambda: ops.normed_linear(x, w_qkv, gain, 1e-5),
        "gate_up normed_gate_up_swiglu": lambda: ops.normed_gate_up_swiglu(x, w_gate_up, gain, 1e-5),
        "down linear_residual_": lambda: ops.linear_residual_(h, w_down, residual, 1.0),
    }
    for name, fn in cases.items():
        times = [graph_time_us(fn, inner=50, reps=40) for _ in range(2)]
        print(f"rows={rows} {name}: " + " / ".join(f"{t:.2f}" for t in times) + " us", flush=True)
