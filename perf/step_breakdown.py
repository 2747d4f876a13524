"""Where a streaming level's wall time goes in-process: prefill, decode step, vocoder, the rest.

Drives the same loop as perf/inprocess_bench.py (engine step, then one vocoder call for the step's
windows) and times its three GPU parts from the host, with a device synchronisation after each so
the GPU time lands in the part that queued it (the syncs add a little time of their own; the total
is reported next to the parts). "host" is what is left: the scheduler and booking, frontend,
Python between the parts. Writes a Markdown table and the raw sums as JSON.

    python -m perf.step_breakdown --checkpoint DIR --levels 1,16,64 --out OUTDIR [--device cuda]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch

from perf.cuda_required import cuda_missing
from perf.inprocess_bench import DTYPES, InProcessSystem
from perf.sweep import parse_levels

PARTS = ("prefill", "decode", "vocoder")


class PartTimer:
    """Wraps callables so each call's host time, device work included, adds to its part."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)

    def _sync(self) -> None:
        if self.device.startswith("cuda"):
            torch.cuda.synchronize()

    def wrap(self, part: str, fn: Callable) -> Callable:
        def timed(*args, **kwargs):
            self._sync()
            started = time.perf_counter()
            result = fn(*args, **kwargs)
            self._sync()
            self.seconds[part] += time.perf_counter() - started
            self.calls[part] += 1
            return result
        return timed

    def reset(self) -> None:
        self.seconds.clear()
        self.calls.clear()


def breakdown_row(concurrency: int, wall_s: float, patches: int, timer: PartTimer) -> dict:
    parts = {part: timer.seconds.get(part, 0.0) for part in PARTS}
    return {
        "concurrency": concurrency, "wall_s": wall_s, "patches": patches,
        "parts_s": parts, "calls": {part: timer.calls.get(part, 0) for part in PARTS},
        "host_s": wall_s - sum(parts.values()),
    }


def markdown(rows: list[dict]) -> str:
    lines = ["| streams | wall s | patches | prefill % (calls, ms each) | decode % (ms per step) | vocoder % (ms per call) | host % |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        wall, parts, calls = row["wall_s"], row["parts_s"], row["calls"]

        def share(part: str) -> str:
            each = 1000 * parts[part] / calls[part] if calls[part] else 0.0
            return f"{100 * parts[part] / wall:.1f} ({calls[part]}, {each:.2f})"

        lines.append(f"| {row['concurrency']} | {wall:.2f} | {row['patches']} | {share('prefill')} | "
                     f"{share('decode')} | {share('vocoder')} | {100 * row['host_s'] / wall:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bfloat16")
    parser.add_argument("--levels", type=parse_levels, default=[1, 16, 64])
    parser.add_argument("--patches", type=int, default=50, help="forced length per request (default 50)")
    parser.add_argument("--rounds", type=int, default=3, help="requests each client sends back to back")
    parser.add_argument("--max-context", type=int, default=4096)
    parser.add_argument("--out", type=Path, required=True, help="folder for breakdown.md and breakdown.json")
    args = parser.parse_args(argv)
    if torch.device(args.device).type == "cuda" and cuda_missing("step_breakdown", "--device cpu"):
        return 2
    system = InProcessSystem(args.checkpoint, args.device, DTYPES[args.dtype], max(args.levels), args.max_context)
    timer = PartTimer(args.device)
    runner = system.engine.runner
    runner.prefill = timer.wrap("prefill", runner.prefill)
    runner.launch = timer.wrap("decode", runner.launch)  # the engine reads its result right after
    system.vocoder.decode = timer.wrap("vocoder", system.vocoder.decode)
    system.run_level(2, 1, 0, 5, 0)  # warm-up
    rows, first = [], 1000
    for level in args.levels:
        timer.reset()
        started = time.perf_counter()
        records = system.run_level(level, args.rounds, first, args.patches, 0)
        wall = time.perf_counter() - started
        first += level * args.rounds
        # Windows carry 1, 2, then 4 patches: count the patches by their samples, not the windows.
        patches = sum(r.audio_samples for r in records) // system.vocoder.samples_per_patch
        rows.append(breakdown_row(level, wall, patches, timer))
        print(markdown(rows[-1:]).splitlines()[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "breakdown.md").write_text(markdown(rows))
    (args.out / "breakdown.json").write_text(json.dumps({"checkpoint": args.checkpoint, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
