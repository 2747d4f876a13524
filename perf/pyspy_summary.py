"""Summarise py-spy's raw (collapsed-stack) recordings: where a process's Python threads spend their
samples, and with `--gil` recordings, who holds the GIL.

A raw file has one line per distinct stack, `thread (TID): NAME;frame;frame;... COUNT`, each frame
`function (file:line)` (`py-spy record --threads -f raw`). Per file this prints the samples per
thread, the frames that most samples end in (self) and that most samples pass through (inclusive,
each frame counted once per stack, threading.py's left out). Given the recording's rate and
length, it also prints the share of the wall time the samples cover: with `--gil`, the share during
which some thread held the GIL.

    python -m perf.pyspy_summary pyspy_ar_decoder_gil.txt --rate 250 --seconds 12
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

_THREAD = re.compile(r"^thread \((?:0x)?[0-9a-fA-F]+\): ?(.*)$")
# Threads started in a loop (delivery workers, gRPC pollers) differ only by a trailing number.
_NUMBERED = re.compile(r"[-_ ]?\d+(?=$| \()")


@dataclass
class Recording:
    samples: int = 0
    threads: Counter = field(default_factory=Counter)
    self_frames: Counter = field(default_factory=Counter)
    inclusive_frames: Counter = field(default_factory=Counter)


def _frame_name(frame: str) -> str:
    """`function (file:line)` -> `function (file)`: one entry per function, not per line."""
    return re.sub(r":\d+\)$", ")", frame.strip())


def parse(lines: Iterable[str]) -> Recording:
    recording = Recording()
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            continue
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            raise ValueError(f"not a py-spy raw line: {line[:120]!r}")
        count = int(count_text)
        frames = stack.split(";")
        thread = "(no thread)"
        match = _THREAD.match(frames[0])
        if match:
            thread = _NUMBERED.sub("", match.group(1)) or "(unnamed)"
            frames = frames[1:]
        recording.samples += count
        recording.threads[thread] += count
        names = [_frame_name(f) for f in frames if f.strip()]
        if names:
            recording.self_frames[f"{thread}: {names[-1]}"] += count
        for name in set(names):
            if not name.endswith("(threading.py)"):  # every thread's bootstrap, run(): no information
                recording.inclusive_frames[f"{thread}: {name}"] += count
    return recording


def _share(count: int, total: int) -> str:
    return f"{100.0 * count / total:.1f}%" if total else "-"


def render(title: str, recording: Recording, top: int, rate: float | None, seconds: float | None) -> str:
    out = [f"## {title}", ""]
    line = f"{recording.samples} samples"
    if rate and seconds:
        line += f", {_share(recording.samples, round(rate * seconds))} of {rate:g}/s x {seconds:g} s"
    out += [line, "", "| thread | samples | share |", "|---|---|---|"]
    for thread, count in recording.threads.most_common():
        out.append(f"| {thread} | {count} | {_share(count, recording.samples)} |")
    for label, counter in (("self", recording.self_frames), ("inclusive", recording.inclusive_frames)):
        out += ["", f"| frame ({label}) | samples | share |", "|---|---|---|"]
        for frame, count in counter.most_common(top):
            out.append(f"| {frame.replace('|', '/')} | {count} | {_share(count, recording.samples)} |")
    return "\n".join(out) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--top", type=int, default=25, help="frames listed per table")
    parser.add_argument("--rate", type=float, default=None, help="samples per second the recording asked for")
    parser.add_argument("--seconds", type=float, default=None, help="how long it recorded")
    args = parser.parse_args(argv)
    for path in args.files:
        with open(path, encoding="utf-8", errors="replace") as handle:
            print(render(path, parse(handle), args.top, args.rate, args.seconds))


if __name__ == "__main__":
    main()
