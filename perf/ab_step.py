"""A/B timing of the decoder step: `profile_step.py` under two or more environment settings, run as
separate processes in an interleaved order, after one throwaway run.

Why interleaved: within one device call, the first profile_step process has come out several
percent slow at 4-16 streams. Comparisons whose B side always ran second showed a gain that was
only run order: in run 16 of perf/RESULTS.md, cuBLASLt looked faster in three calls and slower in
the fourth, which interleaved. Repeats go A B, B A, A B, ... so that drift within the call cancels.

    python perf/ab_step.py --out DIR --variant rows8=VOXCPM_SKINNY_PLAIN_ROWS=8 \
        --variant rows32=VOXCPM_SKINNY_PLAIN_ROWS=32 --batches 1,4,16 --repeats 2

A variant is NAME=VAR=VALUE[,VAR=VALUE...], where a value may hold commas (VAR=0,1); NAME alone keeps
the environment as it is.
NAME@TREE runs another checkout's profile_step.py (its own code, and its kernels library
TREE/build/out/lib/libvoxcpm_kernels.so unless VOXCPM_KERNELS_LIB is set in the variant): how a
branch with no environment switch is timed against this tree, interleaved the same way. Writes
DIR/<variant>_<repeat>/ (each run's profile_step files), DIR/ab_step.json and DIR/ab_step.md (step
ms of every run, the median per variant, and its change against the first variant).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

PROFILE_STEP = Path(__file__).resolve().parent / "profile_step.py"


@dataclass
class Variant:
    name: str
    env: dict[str, str] = field(default_factory=dict)
    tree: Path | None = None  # another checkout whose profile_step.py runs; None: this one

    @property
    def script(self) -> Path:
        return PROFILE_STEP if self.tree is None else self.tree / "perf" / "profile_step.py"

    def environment(self) -> dict[str, str]:
        env = dict(os.environ, **self.env)
        if self.tree is not None and "VOXCPM_KERNELS_LIB" not in self.env:
            env["VOXCPM_KERNELS_LIB"] = str(self.tree / "build" / "out" / "lib" / "libvoxcpm_kernels.so")
        return env


# What profile_step's --modes decide, whatever the environment says: a variant setting one of them
# would time the same configuration on both sides.
MODE_SWITCHES = ("VOXCPM_FP8", "VOXCPM_CUSTOM_OPS", "VOXCPM_CUDA_GRAPHS", "VOXCPM_COMPILE")


def parse_variant(text: str) -> Variant:
    """NAME[@TREE] or NAME[@TREE]=VAR=VALUE[,VAR=VALUE...]; a VALUE may hold commas (VAR=0,1)."""
    label, _, settings = text.partition("=")
    name, at, tree = label.partition("@")
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"variant {text!r}: the name must be letters, digits, '-' or '_'")
    if at and not (Path(tree) / "perf" / "profile_step.py").is_file():
        raise ValueError(f"variant {text!r}: {tree!r} holds no perf/profile_step.py")
    env = {}
    var = None
    for setting in filter(None, settings.split(",")):
        if "=" not in setting and var is not None:
            # a piece without '=' belongs to the value before it: VAR=0,1 sets VAR to "0,1"
            env[var] += "," + setting
            continue
        var, sep, value = setting.partition("=")
        if not sep or not var:
            raise ValueError(f"variant {text!r}: {setting!r} is not VAR=VALUE")
        if var in MODE_SWITCHES:
            raise ValueError(f"variant {text!r}: {var} is set by profile_step's --modes (e.g. graph_ops against "
                             "graph_ops_fp8 in one run), not by the environment")
        env[var] = value
    return Variant(name, env, Path(tree).resolve() if at else None)


def schedule(variants: list[Variant], repeats: int) -> list[tuple[Variant, int]]:
    """Forward order on even repeats, backward on odd ones: A B, B A, A B, ..."""
    order = []
    for repeat in range(repeats):
        ordered = variants if repeat % 2 == 0 else variants[::-1]
        order.extend((variant, repeat) for variant in ordered)
    return order


def step_ms(summary: dict) -> dict[tuple[str, int], float]:
    """(mode, batch) -> step ms of one profile_step.json; failed or skipped entries are left out."""
    return {(r["mode"], r["batch"]): r["step_ms"] for r in summary["results"] if "step_ms" in r}


def table(variants: list[Variant], runs: dict[str, list[dict[tuple[str, int], float]]]) -> str:
    """Markdown: one row per (mode, batch); per variant its runs' step ms and their median, and each
    median's change against the first variant's."""
    keys = sorted({key for per_variant in runs.values() for run in per_variant for key in run})
    base = variants[0].name
    header = ["mode", "B"] + [f"{v.name} ms (runs)" for v in variants] + [f"{v.name} vs {base}" for v in variants[1:]]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for mode, batch in keys:
        medians, cells = {}, []
        for variant in variants:
            values = [run[(mode, batch)] for run in runs[variant.name] if (mode, batch) in run]
            if values:
                medians[variant.name] = statistics.median(values)
                cells.append(f"{medians[variant.name]:.2f} ({' / '.join(f'{v:.2f}' for v in values)})")
            else:
                cells.append("-")
        for variant in variants[1:]:
            if base in medians and variant.name in medians:
                cells.append(f"{100 * (medians[variant.name] / medians[base] - 1):+.1f}%")
            else:
                cells.append("-")
        lines.append("| " + " | ".join([mode, str(batch)] + cells) + " |")
    return "\n".join(lines)


def run_profile_step(out: Path, variant: Variant, profile_args: list[str], timeout_s: float) -> dict | None:
    """One profile_step.py process under the variant's environment; its summary, or None if it
    wrote none (its output is in out/profile_step.log either way)."""
    out.mkdir(parents=True, exist_ok=True)
    summary = out / "profile_step.json"
    summary.unlink(missing_ok=True)  # a reused --out: never read an earlier run's figures
    with open(out / "profile_step.log", "w") as log:
        try:
            done = subprocess.run([sys.executable, str(variant.script), "--out", str(out), *profile_args],
                                  env=variant.environment(), stdout=log, stderr=subprocess.STDOUT,
                                  timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            log.write(f"\nab_step: killed after {timeout_s:.0f} s\n")
        else:
            if done.returncode != 0:  # what it saved before failing still counts: it saves each batch
                log.write(f"\nab_step: profile_step exited with {done.returncode}\n")
    return json.loads(summary.read_text()) if summary.is_file() else None


def last_line(log: Path) -> str:
    """The log's last line that is not ab_step's own (the run's reason for failing, as a rule)."""
    lines = [line for line in log.read_text(errors="replace").splitlines()
             if line.strip() and not line.startswith("ab_step:")]
    return lines[-1].strip() if lines else "(its log is empty)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--variant", action="append", required=True, help="NAME[@TREE][=VAR=VALUE,...], at least two")
    parser.add_argument("--batches", default="1,4,16,64")
    parser.add_argument("--modes", default="graph_ops")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-throwaway", action="store_true", help="skip the first, discarded run")
    parser.add_argument("--run-timeout-s", type=float, default=120.0)
    parser.add_argument("--cpu-dry-run", action="store_true", help="passed to profile_step.py (checks the script)")
    args = parser.parse_args()
    variants = [parse_variant(text) for text in args.variant]
    if len(variants) < 2 or len({v.name for v in variants}) != len(variants):
        parser.error("give at least two --variant, with different names")
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    profile_args = ["--modes", args.modes, "--profile-batches=", "--budget-s", str(args.run_timeout_s - 10)]
    if args.cpu_dry_run:
        profile_args += ["--cpu-dry-run", "--warmup", "1", "--iters", "2"]

    if not args.no_throwaway:
        first_batch = args.batches.split(",")[0]
        run_profile_step(args.out / "throwaway", variants[0], profile_args + ["--batches", first_batch],
                         args.run_timeout_s)
    runs: dict[str, list[dict[tuple[str, int], float]]] = {v.name: [] for v in variants}
    order = schedule(variants, args.repeats)
    for variant, repeat in order:
        summary = run_profile_step(args.out / f"{variant.name}_{repeat}", variant,
                                   profile_args + ["--batches", args.batches], args.run_timeout_s)
        runs[variant.name].append(step_ms(summary) if summary else {})
        log = args.out / f"{variant.name}_{repeat}" / "profile_step.log"
        outcome = "ok" if summary else f"no result: {last_line(log)}"
        print(f"ab_step: {variant.name} repeat {repeat}: {outcome}", flush=True)

    text = table(variants, runs)
    (args.out / "ab_step.md").write_text(text + "\n")
    (args.out / "ab_step.json").write_text(json.dumps({
        "variants": [{"name": v.name, "env": v.env, "tree": str(v.tree) if v.tree else None} for v in variants],
        "order": [f"{v.name}_{r}" for v, r in order],
        "runs": {name: [[{"mode": m, "batch": b, "step_ms": ms} for (m, b), ms in sorted(run.items())]
                        for run in per_variant] for name, per_variant in runs.items()},
    }, indent=1))
    print(text)
    return 0 if all(run for per_variant in runs.values() for run in per_variant) else 1


if __name__ == "__main__":
    sys.exit(main())
