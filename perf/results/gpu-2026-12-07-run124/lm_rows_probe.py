"""Run 124's probe: the LMs' skinny GEMMs at one stream's rows (1-4), with their weights cold as the
step reads them (one call per weight copy, copies enough to outgrow L2), in us per call and the
bandwidth that is; cuBLAS's F.linear beside them; then a whole LM layer's four GEMMs in a chain over
eight layers' copies. VOXCPM_SKINNY_SPLIT_BLOCKS in the environment picks the split plan (run 23's
one block per multiprocessor when unset)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from perf.bench_ops import cold_time_us, rand  # noqa: E402
from voxcpm_triton import ops  # noqa: E402

HIDDEN, QKV, INTER = 2048, (16 + 2 * 2) * 128, 6144
COLD_BYTES = 200 << 20  # each shape's copies together: four times the H100's and H200's 50 MB of L2
plan = os.environ.get("VOXCPM_SKINNY_SPLIT_BLOCKS", "1")


def copies(rows: int, cols: int, scale: float) -> list[torch.Tensor]:
    return [rand(rows, cols, dtype=torch.bfloat16) / scale for _ in range(max(2, COLD_BYTES // (rows * cols * 2)))]


w_qkv, w_o = copies(QKV, HIDDEN, 45), copies(HIDDEN, HIDDEN, 45)
w_gate_up, w_down = copies(2 * INTER, HIDDEN, 45), copies(HIDDEN, INTER, 78)
gain = rand(HIDDEN, dtype=torch.bfloat16)
for rows in (1, 2, 4):
    x = rand(rows, HIDDEN, dtype=torch.bfloat16)
    h = rand(rows, INTER, dtype=torch.bfloat16)
    residual = rand(rows, HIDDEN, dtype=torch.bfloat16)
    cases = {
        "qkv normed_linear": (lambda w: ops.normed_linear(x, w, gain, 1e-5), w_qkv),
        "qkv F.linear": (lambda w: F.linear(x, w), w_qkv),
        "o_proj linear_residual_": (lambda w: ops.linear_residual_(x, w, residual, 1.0), w_o),
        "o_proj F.linear": (lambda w: F.linear(x, w), w_o),
        "gate_up normed_gate_up_swiglu": (lambda w: ops.normed_gate_up_swiglu(x, w, gain, 1e-5), w_gate_up),
        "gate_up F.linear": (lambda w: F.linear(x, w), w_gate_up),
        "down linear_residual_": (lambda w: ops.linear_residual_(h, w, residual, 1.0), w_down),
        "down F.linear": (lambda w: F.linear(h, w), w_down),
    }
    for name, (call, weights) in cases.items():
        times = [cold_time_us(call, weights) for _ in range(2)]
        gbps = weights[0].numel() * 2 / min(times) / 1e3
        print(f"plan={plan} rows={rows} {name}: " + " / ".join(f"{t:.2f}" for t in times) + f" us, {gbps:.0f} GB/s",
              flush=True)

# A layer's four GEMMs back to back (no attention), each layer's weights its own copy.
layers = list(zip(w_qkv[:8], w_o[:8], w_gate_up[:8], w_down[:8]))
x = rand(1, HIDDEN, dtype=torch.bfloat16)
residual = rand(1, HIDDEN, dtype=torch.bfloat16)


def layer(weights: tuple[torch.Tensor, ...]) -> None:
    qkv, o, gate_up, down = weights
    q = ops.normed_linear(residual, qkv, gain, 1e-5)
    ops.linear_residual_(q[:, :HIDDEN].contiguous(), o, residual, 1.0)
    ops.linear_residual_(ops.normed_gate_up_swiglu(residual, gate_up, gain, 1e-5), down, residual, 1.0)


layer_bytes = sum(w.numel() * 2 for w in layers[0])
times = [cold_time_us(layer, layers) for _ in range(2)]
print(f"plan={plan} layer chain, 1 row, {len(layers)} layers: " + " / ".join(f"{t:.2f}" for t in times)
      + f" us a layer, {layer_bytes / min(times) / 1e3:.0f} GB/s", flush=True)
