"""Summarises ncu's per-instruction table of one kernel (stall samples and executed instructions by
SASS line), for reading on the CPU machine where there is no ncu:

    ncu ... --set full -o REPORT python ...                  # on the GPU machine
    ncu --import REPORT.ncu-rep --page source --csv --print-source sass > sass.csv
    python perf/ncu_sass_summary.py sass.csv [--split 136,396,957] [--top 15]

Prints the stall reasons over the whole kernel, the executed instructions by opcode, the hottest
lines with their two main stall reasons, and, with --split, samples and instructions per range of
line indices (the parts of the kernel, found by reading the hot lines). Run 97 read
short_attention's profile this way.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


@dataclass
class Line:
    index: int
    source: str
    samples: int
    executed: int
    stalls: dict[str, int]

    @property
    def opcode(self) -> str:
        words = self.source.split()
        if not words:
            return ""
        return words[1] if words[0].startswith("@") and len(words) > 1 else words[0]


def _number(text: str) -> int:
    text = text.strip().replace(",", "")
    return int(float(text)) if text not in ("", "-") else 0


def read_lines(rows: Iterable[list[str]]) -> list[Line]:
    """The table's lines; the header is the first row that names the samples column (ncu puts the
    kernel's name on a row of its own before it)."""
    rows = iter(rows)
    header = next((row for row in rows if SAMPLES in row), None)
    if header is None or EXECUTED not in header or "Source" not in header:
        raise ValueError(f"no '{SAMPLES}' / '{EXECUTED}' / 'Source' header: not ncu's source page as CSV")
    col = {name: i for i, name in enumerate(header)}
    stall_names = [name for name in header if name.startswith("stall_") and "Not Issued" not in name]
    lines = []
    for row in rows:
        if len(row) < len(header):
            continue
        lines.append(Line(len(lines), row[col["Source"]].strip(), _number(row[col[SAMPLES]]),
                          _number(row[col[EXECUTED]]), {s: _number(row[col[s]]) for s in stall_names}))
    return lines


def summary(lines: list[Line], splits: list[int], top: int) -> str:
    total_samples = sum(line.samples for line in lines) or 1
    total_executed = sum(line.executed for line in lines)
    out = [f"{len(lines)} SASS lines, {total_executed} warp instructions executed, {total_samples} stall samples"]
    stalls = Counter()
    for line in lines:
        stalls.update(line.stalls)
    out.append("stall reasons: " + ", ".join(f"{name[6:]} {count / total_samples:.0%}"
                                             for name, count in stalls.most_common(8) if count))
    opcodes = Counter()
    for line in lines:
        opcodes[line.opcode] += line.executed
    out.append("executed by opcode: " + ", ".join(f"{op} {count}" for op, count in opcodes.most_common(20) if count))
    if splits:
        out.append("\n| lines | samples | share | instructions | share |\n|---|---|---|---|---|")
        bounds = [0] + [b for b in splits if 0 < b < len(lines)] + [len(lines)]
        for start, end in zip(bounds, bounds[1:]):
            part = lines[start:end]
            samples = sum(line.samples for line in part)
            executed = sum(line.executed for line in part)
            out.append(f"| {start}-{end - 1} | {samples} | {samples / total_samples:.0%} | {executed} | "
                       f"{executed / max(total_executed, 1):.0%} |")
    out.append(f"\nhottest {top} lines (index, samples, executed, main stalls, source):")
    for line in sorted(lines, key=lambda item: -item.samples)[:top]:
        if not line.samples:
            break
        main = ", ".join(f"{name[6:]} {count}" for name, count in
                         sorted(line.stalls.items(), key=lambda item: -item[1])[:2] if count)
        out.append(f"{line.index:5d} {line.samples:5d} {line.executed:9d}  {main:32s} {line.source[:70]}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", type=Path, help="ncu --page source --csv --print-source sass output")
    parser.add_argument("--split", default="", help="line indices where the kernel's parts start, comma separated")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    splits = sorted(int(s) for s in args.split.split(",") if s.strip())
    with open(args.csv, newline="") as f:
        try:
            lines = read_lines(csv.reader(f))
        except ValueError as error:
            print(f"ncu_sass_summary: {args.csv}: {error}", file=sys.stderr)
            return 2
    print(summary(lines, splits, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
