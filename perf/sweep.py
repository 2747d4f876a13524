"""The concurrency sweep shared by every benchmark: options, time box, warm-up and the JSON it writes.

A benchmark supplies `run_level(concurrency, rounds, first_request_index) -> list[StreamRecord]`
that runs `concurrency` clients, each sending `rounds` requests back to back, and returns one record
per request. Per level, rounds = max(--rounds, ceil(--min-requests / concurrency)), so the low
levels also give percentiles over several requests. The sweep writes its JSON after every level, so a run killed by its time box still
leaves the levels it finished.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from perf.gpu_memory import gpu_memory_used_mib, gpu_name
from perf.stream_metrics import StreamRecord, summarise_level

DEFAULT_LEVELS = (1, 4, 16, 64, 128, 256)
# 50 patches of 160 ms = 8 s of VoxCPM2 audio: the utterance length of the peer figures in
# ../shared/notes/voxcpm-facts.md.
DEFAULT_PATCHES = 50

RunLevel = Callable[[int, int, int], list[StreamRecord]]


def parse_levels(text: str) -> list[int]:
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--levels must be comma-separated integers, got {text!r}") from exc
    if not levels or any(level < 1 for level in levels):
        raise argparse.ArgumentTypeError(f"--levels must be integers >= 1, got {text!r}")
    return levels


def add_sweep_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--levels", type=parse_levels, default=list(DEFAULT_LEVELS),
                        help="concurrency levels, comma-separated (default 1,4,16,64,128,256)")
    parser.add_argument("--patches", type=int, default=DEFAULT_PATCHES,
                        help="generated length in latent patches, forced per request (default 50)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="requests each client sends back to back per level (default 1)")
    parser.add_argument("--min-requests", type=int, default=8,
                        help="at least this many requests per level (more rounds at low concurrency)")
    parser.add_argument("--warmup", type=int, default=2, help="warm-up requests before the sweep")
    parser.add_argument("--budget-s", type=float, default=None,
                        help="stop starting new levels once this many seconds have passed")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    parser.add_argument("--system", default=None, help="system name in the tables (default per bench)")


def sweep_settings(args: argparse.Namespace) -> dict:
    """The run_sweep keyword arguments that come from add_sweep_options."""
    return {"levels": args.levels, "out": args.out, "rounds": args.rounds, "min_requests": args.min_requests,
            "warmup": args.warmup, "budget_s": args.budget_s}


def rounds_for(concurrency: int, rounds: int, min_requests: int) -> int:
    return max(rounds, math.ceil(min_requests / concurrency))


def git_commit() -> Optional[str]:
    """The device machine gets a copy of the tree without .git: the campaign passes VOXCPM_GIT_COMMIT."""
    if os.environ.get("VOXCPM_GIT_COMMIT"):
        return os.environ["VOXCPM_GIT_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent, timeout=10, check=True).stdout.strip()
    except (subprocess.SubprocessError, OSError):
        return None


def run_sweep(
    system: str,
    run_level: RunLevel,
    sample_rate: int,
    levels: Sequence[int],
    out: Path,
    rounds: int = 1,
    min_requests: int = 1,
    warmup: int = 2,
    budget_s: Optional[float] = None,
    meta: Optional[dict] = None,
    level_details: Optional[Callable[[], dict]] = None,
) -> dict:
    """Runs the levels; `level_details`, when given, is called after each level and its keys are
    added to that level's entry (the served sweep's per-model Triton metrics)."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    started = time.monotonic()
    result = {
        "system": system,
        "sample_rate": sample_rate,
        "meta": {
            "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "host": platform.node(),
            "gpu": gpu_name(),
            "git_commit": git_commit(),
            "rounds": rounds,
            "min_requests": min_requests,
            **(meta or {}),
        },
        "levels": [],
        "skipped_levels": [],
    }
    next_index = 0
    if warmup > 0:
        warm = run_level(1, warmup, next_index)
        next_index += len(warm)
        result["meta"]["warmup_errors"] = sorted({r.error for r in warm if r.error})
    for concurrency in levels:
        if budget_s is not None and time.monotonic() - started > budget_s:
            result["skipped_levels"].append(concurrency)
            continue
        records = run_level(concurrency, rounds_for(concurrency, rounds, min_requests), next_index)
        next_index += len(records)
        summary = summarise_level(records, concurrency, sample_rate, gpu_memory_used_mib())
        result["levels"].append({**summary.to_dict(), **(level_details() if level_details else {})})
        _write(out, result)
        print(f"[{system}] c={concurrency}: first audio p50 {summary.first_audio_ms_p50} ms, "
              f"RTF p50 {summary.rtf_p50}, {summary.throughput_audio_s_per_s} audio s/s, "
              f"failed {summary.failed}/{summary.requests}", flush=True)
    result["meta"]["elapsed_s"] = time.monotonic() - started
    _write(out, result)
    return result


def _write(out: Path, result: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(result, indent=1))
    tmp.replace(out)
