"""Run 114's probe: us per call of qkv_attention against the two kernels it replaces, each repeated
in one CUDA graph (stream-ordered, so every call waits for the one before, as in the step), on one
stream's LocDiT rows (2 sequences x 11 tokens, 16 q / 2 KV heads of 128, hidden 1024)."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from perf.bench_ops import graph_time_us, rand, rope_tables  # noqa: E402
from voxcpm_triton import ops  # noqa: E402

Q, KV, D, HIDDEN, SEQ = 16, 2, 128, 1024, 11
for sequences in (2, 1):
    rows = sequences * SEQ
    x = rand(rows, HIDDEN, dtype=torch.bfloat16)
    w = rand((Q + 2 * KV) * D, HIDDEN, dtype=torch.bfloat16) / 32
    gain = rand(HIDDEN, dtype=torch.bfloat16)
    cos, sin = rope_tables(SEQ, D)
    qkv = ops.normed_linear(x, w, gain, 1e-5)
    cases = {
        "fused qkv_attention": lambda: ops.qkv_attention(x, w, gain, 1e-5, SEQ, Q, KV, cos, sin),
        "normed_linear + short_attention": lambda: ops.short_attention(ops.normed_linear(x, w, gain, 1e-5), SEQ, Q,
                                                                       KV, cos, sin),
        "normed_linear alone": lambda: ops.normed_linear(x, w, gain, 1e-5),
        "short_attention alone": lambda: ops.short_attention(qkv, SEQ, Q, KV, cos, sin),
    }
    for name, fn in cases.items():
        times = [graph_time_us(fn, inner=50, reps=40) for _ in range(3)]
        print(f"rows={rows} {name}: " + " / ".join(f"{t:.2f}" for t in times) + " us")
