"""Merge per-system sweep JSONs into one Markdown report and one PNG (all systems on each plot).

    python -m perf.report OUT_DIR ours_inprocess.json ours_triton.json reference.json nanovllm.json

Writes OUT_DIR/summary.md, OUT_DIR/summary.json and OUT_DIR/plots.png (plots need matplotlib; the
Markdown does not). Ratios compare each system whose name starts with "ours" (else the first one)
with each other system at each concurrency: throughput ratio = ours / theirs (higher is better),
first-audio ratio = ours / theirs (lower is better).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Optional, Sequence

from perf.triton_metrics import decode_markdown
from perf.triton_metrics import markdown as metrics_markdown

METRIC_COLUMNS = (
    ("first_audio_ms_p50", "first audio p50 ms", "{:.1f}"),
    ("first_audio_ms_p90", "p90 ms", "{:.1f}"),
    ("first_audio_ms_p99", "p99 ms", "{:.1f}"),
    ("rtf_p50", "RTF p50", "{:.3f}"),
    ("wall_over_audio_p50", "wall/audio p50", "{:.3f}"),
    ("throughput_audio_s_per_s", "audio s/s", "{:.1f}"),
    ("audio_s_per_request_min", "audio s/req min", "{:.2f}"),
    ("gpu_memory_used_mib", "GPU MiB", "{:.0f}"),
    ("failed", "failed", "{}"),
)


def load_results(paths: Sequence[Path]) -> list[dict]:
    results = []
    for path in paths:
        data = json.loads(Path(path).read_text())
        if "system" not in data or "levels" not in data:
            raise ValueError(f"{path} is not a sweep result (needs 'system' and 'levels')")
        results.append(data)
    return results


def _fmt(value, pattern: str) -> str:
    if value is None:
        return "-"
    return pattern.format(value)


def system_table(result: dict) -> str:
    header = ["concurrency", "requests"] + [title for _, title, _ in METRIC_COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for level in result["levels"]:
        cells = [str(level["concurrency"]), str(level["requests"])]
        cells += [_fmt(level.get(key), pattern) for key, _, pattern in METRIC_COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    if result.get("skipped_levels"):
        lines.append(f"\nSkipped (time box): {', '.join(map(str, result['skipped_levels']))}")
    return "\n".join(lines)


def _by_concurrency(result: dict) -> dict[int, dict]:
    return {level["concurrency"]: level for level in result["levels"]}


def ratio(ours: Optional[float], theirs: Optional[float]) -> Optional[float]:
    if ours is None or theirs is None or theirs == 0:
        return None
    return ours / theirs


def differences(ours: dict, theirs: dict) -> list[str]:
    """What makes two runs incomparable: a different forced length, output rate or GPU (fields an
    older result lacks are not held against it)."""
    found = []
    if ours.get("sample_rate") != theirs.get("sample_rate"):
        found.append(f"sample rate {ours.get('sample_rate')} vs {theirs.get('sample_rate')}")
    for key in ("patches", "gpu"):
        mine, other = ours.get("meta", {}).get(key), theirs.get("meta", {}).get(key)
        if mine is not None and other is not None and mine != other:
            found.append(f"{key} {mine} vs {other}")
    return found


def ratio_table(ours: dict, others: Sequence[dict]) -> str:
    header = ["concurrency"]
    for other in others:
        header += [f"throughput x vs {other['system']}", f"first audio x vs {other['system']}"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    mine = _by_concurrency(ours)
    for concurrency in sorted(mine):
        cells = [str(concurrency)]
        for other in others:
            theirs = _by_concurrency(other).get(concurrency, {})
            cells.append(_fmt(ratio(mine[concurrency].get("throughput_audio_s_per_s"),
                                    theirs.get("throughput_audio_s_per_s")), "{:.2f}"))
            cells.append(_fmt(ratio(mine[concurrency].get("first_audio_ms_p50"),
                                    theirs.get("first_audio_ms_p50")), "{:.2f}"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_markdown(results: Sequence[dict]) -> str:
    parts = ["# Streaming benchmark", ""]
    for result in results:
        meta = result.get("meta", {})
        parts += [f"## {result['system']}", "",
                  f"date {meta.get('date_utc')}, host {meta.get('host')}, commit {meta.get('git_commit')}, "
                  f"sample rate {result.get('sample_rate')}, per level at least {meta.get('min_requests', 1)} "
                  f"requests and {meta.get('rounds', 1)} per client"
                  + (f", {meta['notes']}" if meta.get("notes") else ""), "",
                  system_table(result), ""]
        served = [(f"c={level['concurrency']}", level["served_models"]) for level in result["levels"]
                  if level.get("served_models")]
        if served:
            parts += ["Per model inside tritonserver, from its metrics around each level (busy %: the model's "
                      "execution time over the level's time; the ensemble's executions are whole streams):",
                      "", metrics_markdown(served)]
            engine = decode_markdown(served)
            if engine:
                parts += ["The ar_decoder's engine thread per step (stepping: admissions and the decode step; "
                          "back-pressure: waiting for the vocoder; hand-off: waiting for a delivery thread):",
                          "", engine]
    ours = [r for r in results if r["system"].startswith("ours")] or list(results[:1])
    others = [r for r in results if r not in ours]
    for mine in ours:
        apart = [(other, differences(mine, other)) for other in others]
        comparable = [other for other, why in apart if not why]
        for other, why in apart:
            if why:
                parts += [f"No ratios of {mine['system']} against {other['system']}: {', '.join(why)}.", ""]
        if comparable:
            parts += [f"## Ratios: {mine['system']} against each baseline",
                      "(throughput: higher is better; first audio: lower is better)", "",
                      ratio_table(mine, comparable), ""]
    return "\n".join(parts)


def plot(results: Sequence[dict], path: Path) -> bool:
    """One PNG, three panels (first audio p50, RTF p50, throughput) against concurrency."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as exc:  # absent, or built against another numpy: the Markdown still stands
        print(f"no plots: matplotlib does not import ({type(exc).__name__}: {exc})")
        return False
    panels = (("first_audio_ms_p50", "first audio p50 (ms)"), ("rtf_p50", "RTF p50 ((wall-first)/audio)"),
              ("throughput_audio_s_per_s", "throughput (audio s per s)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5))
    for axis, (key, label) in zip(axes, panels):
        for result in results:
            points = [(lv["concurrency"], lv[key]) for lv in result["levels"] if lv.get(key) is not None]
            if points:
                axis.plot(*zip(*points), marker="o", label=result["system"])
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("concurrent streams")
        axis.set_ylabel(label)
        axis.grid(True, which="both", alpha=0.3)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("results", type=Path, nargs="+", help="sweep JSONs (missing files are skipped)")
    args = parser.parse_args(argv)
    existing = [p for p in args.results if p.is_file()]
    if not existing:
        parser.error("none of the result files exist")
    results = load_results(existing)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "summary.md").write_text(render_markdown(results))
    (args.out_dir / "summary.json").write_text(json.dumps(results, indent=1))
    plotted = plot(results, args.out_dir / "plots.png")
    print(render_markdown(results))
    print(f"plots: {'written' if plotted else 'skipped (no matplotlib)'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
