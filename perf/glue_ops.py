"""Where the decode step still runs plain PyTorch kernels: each aten op of one eager graph_ops step
that is not inside a custom op (voxcpm::*) and launches device work, with the model line that
issued it, per batch size. Those kernels sit between the programmatic-dependent chain's links:
each one waits for the kernel before it to finish and makes the next one wait for it.

    python perf/glue_ops.py [--batches 1,64] [--out glue.md]

Full-size VoxCPM2-shaped random bf16 weights on the GPU, the step launched eagerly after warm-up
steps inside lt_gemm.tuning(), so each GEMM shape runs the kernel a graph capture would pick.
`--cpu-dry-run` runs the tiny model on the CPU: it checks the script, and lists every top-level op
there (views included), since nothing launches device work.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perf.cuda_required import cuda_missing  # noqa: E402
from perf.profile_step import MODES, decoding_runner, random_model, step  # noqa: E402
from voxcpm_triton.ops import lt_gemm  # noqa: E402


def call_site(event) -> str:
    """The innermost frames of the model code (voxcpm_triton/...) that issued the op. Depending on
    the torch version, with_stack fills the op's own stack or records the Python calls as its
    ancestor events (torch 2.13 here); both are read."""
    frames = [frame for frame in event.stack if "voxcpm_triton/" in frame]
    parent = event.cpu_parent
    while parent is not None and not frames[2:]:
        if "voxcpm_triton/" in parent.name:
            frames.append(parent.name)
        parent = parent.cpu_parent
    return " <- ".join(frame.split("voxcpm_triton/")[-1] for frame in frames[:3]) or "?"


def glue_events(prof, on_device: bool) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for event in prof.events():
        if not event.name.startswith("aten::"):
            continue
        parent, nested = event.cpu_parent, False
        while parent is not None:
            nested |= parent.name.startswith(("aten::", "voxcpm::"))
            parent = parent.cpu_parent
        if nested or (on_device and event.device_time_total <= 0):
            continue
        shapes = str(event.input_shapes)[:48]
        counts[(event.name, shapes, call_site(event))] += 1
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,64")
    parser.add_argument("--context", type=int, default=300)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--cpu-dry-run", action="store_true")
    args = parser.parse_args()
    on_device = not args.cpu_dry_run
    if on_device and cuda_missing("glue_ops", "--cpu-dry-run"):
        return 2
    device = torch.device("cuda" if on_device else "cpu")
    model = random_model("full" if on_device else "tiny", device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_device else [])
    options = dict(MODES["graph_ops"], cuda_graphs=False)
    context = args.context if on_device else 16
    lines = []
    for batch in (int(b) for b in args.batches.split(",")):
        runner, streams = decoding_runner(model, batch, context, 1024 if on_device else 64, 10, 2.0, options)
        with lt_gemm.tuning():  # as a graph capture's warm-up: each GEMM shape picks its kernel
            for _ in range(3):
                step(runner, streams)
        if on_device:
            torch.cuda.synchronize()
        with profile(activities=activities, with_stack=True, record_shapes=True) as prof:
            step(runner, streams)
            if on_device:
                torch.cuda.synchronize()
        counts = glue_events(prof, on_device)
        lines += [f"### B={batch}: {sum(counts.values())} plain PyTorch ops outside the custom ops in one step", "",
                  "| calls | op | input shapes | issued at |", "|---|---|---|---|"]
        lines += [f"| {n} | {name} | {shapes} | {site} |" for (name, shapes, site), n in counts.most_common()]
        lines.append("")
        runner = streams = None
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
