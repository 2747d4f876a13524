"""First- and last-response latency from perf_analyzer profile exports of the decoupled ensemble.

perf_analyzer reports latency to the final response of a decoupled model; its --profile-export-file
keeps each request's send timestamp and every response's timestamp (nanoseconds), from which this
computes time to first audio chunk as a client sees it.

    python -m perf.perf_analyzer_export perf_analyzer_c1.json perf_analyzer_c16.json --out pa.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Optional, Sequence

from perf.stream_metrics import percentile


def experiment_rows(export: dict) -> list[dict]:
    """One row per experiment (concurrency level) of one export file."""
    rows = []
    for experiment in export.get("experiments", []):
        setting = experiment.get("experiment", {})
        first, last, counts = [], [], []
        unanswered = 0
        for request in experiment.get("requests", []):
            responses = request.get("response_timestamps") or []
            if not responses:  # failed or timed out: counted, not timed
                unanswered += 1
                continue
            sent = request["timestamp"]
            first.append((min(responses) - sent) / 1e6)
            last.append((max(responses) - sent) / 1e6)
            counts.append(len(responses))
        row = {"mode": setting.get("mode"), "value": setting.get("value"), "requests": len(first),
               "unanswered": unanswered}
        if first:
            row.update(first_ms_p50=percentile(first, 50), first_ms_p90=percentile(first, 90),
                       first_ms_p99=percentile(first, 99), last_ms_p50=percentile(last, 50),
                       responses_per_request=sum(counts) / len(counts))
        rows.append(row)
    return rows


def render(rows: Sequence[dict]) -> str:
    lines = ["## perf_analyzer (profile export): first response = first audio chunk", "",
             "| mode | value | requests | without a response | first response p50 ms | p90 ms | p99 ms "
             "| last response p50 ms | responses/request |", "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        if "first_ms_p50" not in row:
            lines.append(f"| {row['mode']} | {row['value']} | 0 | {row['unanswered']} | - | - | - | - | - |")
            continue
        lines.append(f"| {row['mode']} | {row['value']} | {row['requests']} | {row['unanswered']} | "
                     f"{row['first_ms_p50']:.1f} | "
                     f"{row['first_ms_p90']:.1f} | {row['first_ms_p99']:.1f} | {row['last_ms_p50']:.1f} | "
                     f"{row['responses_per_request']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("exports", type=Path, nargs="+")
    parser.add_argument("--out", type=Path, required=True, help="Markdown file to write")
    args = parser.parse_args(argv)
    rows = []
    for path in args.exports:
        if path.is_file():
            rows += experiment_rows(json.loads(path.read_text()))
    text = render(rows)
    args.out.write_text(text)
    print(text)
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
