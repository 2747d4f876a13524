"""The engine's host work per decode step at B streams, with the device's share left out.

    python -m perf.host_step [--batches 1,64,256,512] [--steps 200] [--window 6]

A synchronous engine leaves the GPU idle while the host reads step n, books it and queues step n+1
(perf/step_gap.py measures that idle time on the H200). This times the host parts on the CPU alone,
so they can be worked on without a GPU:
- `launch`: ModelRunner.launch on the fixed-shape path the CUDA engine takes (noise refills, the
  step's slot and noise-row index), with `_fixed_advance`, the device work a CUDA graph replays,
  replaced by a ready output, and PendingStep.result's read-out;
- `book`: Scheduler.schedule then Scheduler.book (per-stream counters, stop decisions and the
  vocoder windows of `--window` patches; VoxCPM2's full-size vocoder reads ~0.8 s of context, 6).
Median and 90th percentile microseconds per step. The noise refill (one draw per stream every
VOXCPM_NOISE_BLOCK steps) lands on the same step for streams admitted together, hence the p90.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from perf.profile_step import decoding_runner, random_model, request
from perf.stream_metrics import percentile
from voxcpm_triton.config import ModelConfig
from voxcpm_triton.engine.scheduler import Scheduler


def summary(seconds: list[float]) -> tuple[float, float]:
    """(median, 90th percentile) in us."""
    return percentile(seconds, 50) * 1e6, percentile(seconds, 90) * 1e6


def launch_times(model: torch.nn.Module, batch: int, steps: int) -> list[float]:
    runner, streams = decoding_runner(model, batch, 20, 64, 10, 2.0, {})
    ready = torch.zeros(2 * batch, runner.patch_shape[0] * runner.patch_shape[1] + 1)  # >= any bucket
    runner._fixed_advance = lambda index, groups: ready[:index.shape[1]]
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        runner.decode(streams)
        times.append(time.perf_counter() - start)
    return times


def book_times(config: ModelConfig, batch: int, steps: int, window: int) -> list[float]:
    scheduler = Scheduler(batch, 100_000, window)
    for i in range(batch):
        scheduler.add(request(config, f"s{i}", 8, 10, 2.0, i))
    patch_shape = (config.patch_size, config.feat_dim)
    patches = np.random.default_rng(0).standard_normal((batch, *patch_shape)).astype(np.float32)
    stop = np.zeros(batch, dtype=bool)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step, _ = scheduler.schedule()
        for stream in step.running:
            stream.launched += 1
        scheduler.book(step, patches, stop)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", default="1,64,256,512")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--window", type=int, default=6)
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = random_model("tiny", torch.device("cpu"))
    print("| streams | launch us (median / p90) | schedule + book us (median / p90) |")
    print("|---|---|---|")
    for batch in (int(b) for b in args.batches.split(",")):
        launch = summary(launch_times(model, batch, args.steps))
        book = summary(book_times(model.config, batch, args.steps, args.window))
        print(f"| {batch} | {launch[0]:.0f} / {launch[1]:.0f} | {book[0]:.0f} / {book[1]:.0f} |")


if __name__ == "__main__":
    main()
