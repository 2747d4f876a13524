"""How far the FP8 decoder step's patches are from the bf16 step's: the quality cost that goes with
graph_ops_fp8's speed (perf/profile_step.py).

Both runs start from the same state (random KV caches and hidden states drawn from one seed, the
same per-stream noise seeds) on a full-size VoxCPM2-shaped random bf16 model with the custom ops and
CUDA graphs; the fp8 run sets VOXCPM_FP8=1. Step 1 is the error of one step alone; later steps
also carry the earlier steps' differences through the autoregressive loop (and FSQ, where a
small difference can move a value to the next level).

Per step: max |fp8 - bf16|, that over max |bf16|, and the RMS difference over the RMS of the bf16
patches.

Usage: python perf/fp8_drift.py --out DIR [--batches 64,256] [--steps 4] [--min-rows 1024]
Writes DIR/fp8_drift.json and DIR/fp8_drift.md.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perf.cuda_required import cuda_missing  # noqa: E402
from perf.profile_step import MODES, decoding_runner, random_model  # noqa: E402
from voxcpm_triton.ops import library_status  # noqa: E402


def patches_over_steps(model, batch: int, steps: int, args: argparse.Namespace, mode: str) -> np.ndarray:
    """[steps, batch, P, D] patches of `steps` decode steps from the seeded starting state."""
    torch.manual_seed(0)
    runner, streams = decoding_runner(model, batch, args.context, args.max_context, args.timesteps, args.cfg,
                                      MODES[mode])
    out = []
    for _ in range(steps):
        patches, _ = runner.decode(streams)
        out.append(np.array(patches, dtype=np.float32))  # the runner reuses its host buffer
        for stream in streams:
            stream.produced += 1
    del runner, streams
    gc.collect()
    torch.cuda.empty_cache()
    return np.stack(out)


def compare(exact: np.ndarray, approx: np.ndarray) -> list[dict]:
    rows = []
    for index, (a, b) in enumerate(zip(exact, approx), start=1):
        diff = np.abs(b - a)
        rows.append({"step": index, "max_abs": float(diff.max()), "max_rel": float(diff.max() / np.abs(a).max()),
                     "rms_rel": float(np.sqrt(np.mean(diff ** 2)) / np.sqrt(np.mean(a ** 2))),
                     "finite": bool(np.isfinite(b).all())})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--batches", default="64,256")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--min-rows", type=int, default=1024, help="VOXCPM_FP8_MIN_ROWS of the fp8 run")
    parser.add_argument("--context", type=int, default=300)
    parser.add_argument("--max-context", type=int, default=1024)
    parser.add_argument("--timesteps", type=int, default=10)
    parser.add_argument("--cfg", type=float, default=2.0)
    args = parser.parse_args()
    if cuda_missing("fp8_drift"):
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ["VOXCPM_FP8_MIN_ROWS"] = str(args.min_rows)
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, kernels: {library_status()}", flush=True)
    model = random_model("full", torch.device("cuda"))
    results = {}
    lines = ["| B | step | max abs diff | max abs / max abs bf16 | RMS diff / RMS bf16 |", "|---|---|---|---|---|"]
    for batch in (int(b) for b in args.batches.split(",")):
        exact = patches_over_steps(model, batch, args.steps, args, "graph_ops")
        approx = patches_over_steps(model, batch, args.steps, args, "graph_ops_fp8")
        results[batch] = compare(exact, approx)
        for row in results[batch]:
            print(json.dumps({"batch": batch, **row}), flush=True)
            lines.append(f"| {batch} | {row['step']} | {row['max_abs']:.4g} | {row['max_rel']:.4g} | "
                         f"{row['rms_rel']:.4g} |" + ("" if row["finite"] else " non-finite fp8 values"))
    table = "\n".join(lines)
    (args.out / "fp8_drift.json").write_text(json.dumps({"device": torch.cuda.get_device_name(),
                                                         "min_rows": args.min_rows, "results": results}, indent=1))
    (args.out / "fp8_drift.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
