"""Per-model serving time from two snapshots of tritonserver's Prometheus metrics (port 8002).

Triton adds each request's queue and compute times to cumulative counters per model; the difference
of two snapshots taken around a load level, divided by the requests that completed in between, is
what one request cost each model on average, and requests per execution is the batch the dynamic
batcher formed. For the decoupled ar_decoder a "request" is a whole stream.

    curl -s localhost:8002/metrics > before.txt; (load); curl -s localhost:8002/metrics > after.txt
    python -m perf.triton_metrics before.txt after.txt [--label "c=16"]

Those per-request means weight each execution by its batch size, so they cannot say how long a
model was busy; Triton's statistics extension (/v2/models/stats on the HTTP port) can: its
batch_stats count executions per batch size with their summed times (`busy_ms`).
perf/stream_load.py takes both snapshots around every level itself when given --metrics-url and
--stats-url (`LevelMetrics`), and perf/report.py prints the rows under the served system's table.

The ar_decoder also counts its engine thread's time (voxcpm_decode_*_total: steps, streams per step,
seconds stepping, waiting for the vocoder's back-pressure, waiting for its delivery threads); a
model row that has them carries them as `decode`, and `decode_markdown` tables them per step. With
one decoder per GPU the row sums the instances (its shares of the level's time can pass 100%), and
`decode_instances` keeps each instance's own counters, tabled beneath it: whether Triton spread the
streams over the GPUs.
"""

from __future__ import annotations

import argparse
import json
import re
import time
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from voxcpm_triton.serving.step_meter import COUNTERS as STEP_COUNTERS

DURATIONS = ("request", "queue", "compute_input", "compute_infer", "compute_output")
SETTLE_S, SETTLE_TRIES = 0.05, 40  # LevelMetrics waits up to 2 s for the counters to settle
_LINE = re.compile(r'^((?:nv_inference|voxcpm_decode)_\w+)\{([^}]*)\}\s+([0-9.eE+-]+)$')
_MODEL, _INSTANCE = re.compile(r'model="([^"]*)"'), re.compile(r'instance="([^"]*)"')
# The ar_decoder's engine-thread counters (serving/step_meter.py), by their names' middle parts.
DECODE = tuple(name.removeprefix("voxcpm_decode_").removesuffix("_total") for name, _, _ in STEP_COUNTERS)


def _samples(text: str) -> Iterator[tuple[str, str, float]]:
    """(metric name, labels, value) of every nv_inference_* / voxcpm_decode_* line."""
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if match:
            name, labels, value = match.groups()
            yield name, labels, float(value)


def parse(text: str) -> dict[str, dict[str, float]]:
    """model -> metric name -> value, summed over versions and other labels."""
    models: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name, labels, value in _samples(text):
        model = _MODEL.search(labels)
        if model:
            models[model.group(1)][name] += value
    return models


def _decode_by_instance(text: str) -> dict[str, dict[str, dict[str, float]]]:
    """model -> instance -> the ar_decoder's engine-thread counters (voxcpm_decode_*) of that instance."""
    counters: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for name, labels, value in _samples(text):
        if not name.startswith("voxcpm_decode_"):
            continue
        model, instance = _MODEL.search(labels), _INSTANCE.search(labels)
        if model and instance:
            counters[model.group(1)][instance.group(1)][name] = value
    return counters


def _successes(text: str) -> dict[str, float]:
    return {model: values.get("nv_inference_request_success", 0.0) for model, values in parse(text).items()}


def per_model(before: str, after: str) -> list[dict]:
    """One row per model with completed requests between the snapshots."""
    old, new = parse(before), parse(after)
    old_instances, new_instances = _decode_by_instance(before), _decode_by_instance(after)
    rows = []
    for model in sorted(new):
        delta = {name: new[model][name] - old.get(model, {}).get(name, 0.0) for name in new[model]}
        requests = delta.get("nv_inference_request_success", 0.0)
        if requests <= 0:
            continue
        executions = delta.get("nv_inference_exec_count", 0.0)
        row = {"model": model, "requests": int(requests), "executions": int(executions),
               "batch": requests / executions if executions else 0.0,
               "failed": int(delta.get("nv_inference_request_failure", 0.0))}
        for part in DURATIONS:
            row[f"{part}_ms"] = delta.get(f"nv_inference_{part}_duration_us", 0.0) / requests / 1000
        if delta.get("voxcpm_decode_steps_total", 0.0) > 0:
            row["decode"] = {part: delta.get(f"voxcpm_decode_{part}_total", 0.0) for part in DECODE}
            instances = new_instances.get(model, {})
            if len(instances) > 1:
                was = old_instances.get(model, {})
                row["decode_instances"] = {
                    instance: {part: counters.get(f"voxcpm_decode_{part}_total", 0.0)
                               - was.get(instance, {}).get(f"voxcpm_decode_{part}_total", 0.0) for part in DECODE}
                    for instance, counters in sorted(instances.items())}
        rows.append(row)
    return rows


def _decode_line(label: str, d: dict[str, float], level_ms: Optional[float]) -> str:
    if d["steps"] <= 0:
        return f"| {label} | 0 | - | - | - | - | - | - |"
    per_step = lambda seconds: 1000 * seconds / d["steps"]
    share = lambda seconds: f"{100 * 1000 * seconds / level_ms:.0f}" if level_ms else "-"
    return (f"| {label} | {d['steps']:.0f} | {d['stream_steps'] / d['steps']:.1f} | "
            f"{per_step(d['step_seconds']):.2f} | {per_step(d['gate_seconds']):.2f} | "
            f"{per_step(d['handoff_seconds']):.2f} | {share(d['step_seconds'])} | {share(d['gate_seconds'])} |")


def decode_markdown(levels: Sequence[tuple[str, list[dict]]]) -> str:
    """Per level, the ar_decoder engine thread's time per step (from rows with `decode`), then a
    line per instance where there are several; the shares are of the level's wall time when the row
    has `level_ms`."""
    lines = ["| level | steps | streams per step | step ms | back-pressure ms per step | hand-off ms per step | "
             "stepping % | back-pressure % |", "|" + "---|" * 8]
    for label, rows in levels:
        for row in rows:
            if "decode" not in row:
                continue
            lines.append(_decode_line(label, row["decode"], row.get("level_ms")))
            for instance, d in row.get("decode_instances", {}).items():
                lines.append(_decode_line(f"{label} {instance}", d, row.get("level_ms")))
    return "\n".join(lines) + "\n" if len(lines) > 2 else ""


def markdown(levels: Sequence[tuple[str, list[dict]]]) -> str:
    """One table: per (label, rows) a row per model."""
    head = "| level | model | requests | executions | mean batch | failed | " + " | ".join(
        f"{part} ms/request" for part in DURATIONS) + " | busy % |"
    lines = [head, "|" + "---|" * (7 + len(DURATIONS))]
    for label, rows in levels:
        for row in rows:
            busy = f"{row['busy_pct']:.0f}" if "busy_pct" in row else "-"
            lines.append(f"| {label} | {row['model']} | {row['requests']} | {row['executions']} | "
                         f"{row['batch']:.1f} | {row['failed']} | "
                         + " | ".join(f"{row[f'{part}_ms']:.2f}" for part in DURATIONS) + f" | {busy} |")
    return "\n".join(lines) + "\n"


def _executing_ns(stats: dict) -> dict[str, int]:
    """model -> ns spent in its executions so far, from one /v2/models/stats reply."""
    totals: dict[str, int] = defaultdict(int)
    for model in stats.get("model_stats", []):
        for batch in model.get("batch_stats", []):
            totals[model["name"]] += sum(batch[part]["ns"] for part in ("compute_input", "compute_infer",
                                                                         "compute_output"))
    return totals


def busy_ms(before: dict, after: dict) -> dict[str, float]:
    """model -> ms it spent executing between two /v2/models/stats replies (summed over its
    instances; the ensemble's executions are whole streams)."""
    old, new = _executing_ns(before), _executing_ns(after)
    return {model: (ns - old.get(model, 0)) / 1e6 for model, ns in new.items()}


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as reply:
        return reply.read().decode()


class LevelMetrics:
    """Wraps a sweep's run_level so that each call is bracketed by snapshots of Triton's /metrics
    (`metrics_url`) and /v2/models/stats (`stats_url`); `details()` gives the last call's per-model
    rows for the sweep's JSON, each with `busy_pct`: the model's execution time over the level's
    (above 100 where executions overlap: several instances, or the ensemble's streams)."""

    def __init__(self, metrics_url: str, stats_url: str, run_level: Callable[[int, int, int], list],
                 fetch_text: Callable[[str], str] = fetch):
        self.metrics_url = metrics_url
        self.stats_url = stats_url
        self._run_level = run_level
        self._fetch = fetch_text
        self._rows: list[dict] = []

    def _snapshot(self) -> tuple[str, dict]:
        return self._fetch(self.metrics_url), json.loads(self._fetch(self.stats_url))

    def _settled_snapshot(self) -> tuple[str, dict]:
        """A snapshot once the request counters stop moving: Triton books a decoupled ensemble's
        request after the client has its final response, so a snapshot taken at once can miss the
        level's last streams."""
        metrics = self._fetch(self.metrics_url)
        for _ in range(SETTLE_TRIES):
            time.sleep(SETTLE_S)
            again = self._fetch(self.metrics_url)
            if _successes(again) == _successes(metrics):
                break
            metrics = again
        return metrics, json.loads(self._fetch(self.stats_url))

    def run_level(self, concurrency: int, rounds: int, first_index: int) -> list:
        (metrics, stats), started = self._snapshot(), time.monotonic()
        records = self._run_level(concurrency, rounds, first_index)
        elapsed_ms = (time.monotonic() - started) * 1000
        metrics_after, stats_after = self._settled_snapshot()
        busy = busy_ms(stats, stats_after)
        self._rows = per_model(metrics, metrics_after)
        for row in self._rows:
            row["busy_pct"] = 100 * busy.get(row["model"], 0.0) / elapsed_ms
            row["level_ms"] = elapsed_ms
        return records

    def details(self) -> dict:
        return {"served_models": self._rows}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--label", default="")
    args = parser.parse_args(argv)
    levels = [(args.label, per_model(args.before.read_text(), args.after.read_text()))]
    print(markdown(levels) + decode_markdown(levels), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
