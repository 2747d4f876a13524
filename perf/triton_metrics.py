"""Per-model serving time from two snapshots of tritonserver's Prometheus metrics (port 8002).

Triton adds each request's queue and compute times to cumulative counters per model; the difference
of two snapshots taken around a load level, divided by the requests that completed in between, is
what one request cost each model on average, and requests per execution is the batch the dynamic
batcher formed. For the decoupled ar_decoder a "request" is a whole stream.

    curl -s localhost:8002/metrics > before.txt; (load); curl -s localhost:8002/metrics > after.txt
    python -m perf.triton_metrics before.txt after.txt [--label "c=16"]
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path
from typing import Optional, Sequence

DURATIONS = ("request", "queue", "compute_input", "compute_infer", "compute_output")
_LINE = re.compile(r'^(nv_inference_\w+)\{([^}]*)\}\s+([0-9.eE+-]+)$')


def parse(text: str) -> dict[str, dict[str, float]]:
    """model -> metric name -> value, summed over versions and other labels."""
    models: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if not match:
            continue
        name, labels, value = match.groups()
        model = re.search(r'model="([^"]*)"', labels)
        if model:
            models[model.group(1)][name] += float(value)
    return models


def per_model(before: str, after: str) -> list[dict]:
    """One row per model with completed requests between the snapshots."""
    old, new = parse(before), parse(after)
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
        rows.append(row)
    return rows


def markdown(rows: list[dict], label: str = "") -> str:
    head = "| level | model | requests | executions | mean batch | failed | " + " | ".join(
        f"{part} ms/request" for part in DURATIONS) + " |"
    lines = [head, "|" + "---|" * (6 + len(DURATIONS))]
    for row in rows:
        lines.append(f"| {label} | {row['model']} | {row['requests']} | {row['executions']} | {row['batch']:.1f} | "
                     f"{row['failed']} | " + " | ".join(f"{row[f'{part}_ms']:.2f}" for part in DURATIONS) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--label", default="")
    args = parser.parse_args(argv)
    print(markdown(per_model(args.before.read_text(), args.after.read_text()), args.label), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
