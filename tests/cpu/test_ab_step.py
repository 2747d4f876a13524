"""perf/ab_step.py: variant parsing, the interleaved order, the comparison table, and one real run of
two profile_step.py processes (tiny model on the CPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perf.ab_step import Variant, last_line, parse_variant, schedule, table

ROOT = Path(__file__).resolve().parents[2]


def test_parse_variant():
    assert parse_variant("base") == Variant("base", {})
    assert parse_variant("rows32=VOXCPM_SKINNY_PLAIN_ROWS=32,TORCH_BLAS_PREFER_CUBLASLT=0") == Variant(
        "rows32", {"VOXCPM_SKINNY_PLAIN_ROWS": "32", "TORCH_BLAS_PREFER_CUBLASLT": "0"})
    assert parse_variant("old=VOXCPM_GATE_UP_ONLY=0,1,X=2").env == {"VOXCPM_GATE_UP_ONLY": "0,1", "X": "2"}
    for bad in ("", "a b=X=1", "a=0,X=1", "lt=TORCH_BLAS_PREFER_CUBLASLT", "x==1", "branch@/nonexistent/tree"):
        with pytest.raises(ValueError):
            parse_variant(bad)


def test_a_variant_of_another_tree_runs_its_script_with_its_library(tmp_path):
    branch = parse_variant(f"branch@{ROOT}=VOXCPM_SKINNY_BIAS=0")
    assert branch.tree == ROOT and branch.script == ROOT / "perf" / "profile_step.py"
    env = branch.environment()
    assert env["VOXCPM_KERNELS_LIB"] == str(ROOT / "build" / "out" / "lib" / "libvoxcpm_kernels.so")
    assert env["VOXCPM_SKINNY_BIAS"] == "0"
    chosen = parse_variant(f"branch@{ROOT}=VOXCPM_KERNELS_LIB={tmp_path}/lib.so")
    assert chosen.environment()["VOXCPM_KERNELS_LIB"] == f"{tmp_path}/lib.so"


def test_schedule_alternates_the_order_each_repeat():
    a, b, c = Variant("a"), Variant("b"), Variant("c")
    order = [(v.name, r) for v, r in schedule([a, b, c], 3)]
    assert order == [("a", 0), ("b", 0), ("c", 0), ("c", 1), ("b", 1), ("a", 1), ("a", 2), ("b", 2), ("c", 2)]


def test_table_medians_and_change_against_the_first_variant():
    variants = [Variant("old"), Variant("new")]
    runs = {
        "old": [{("graph_ops", 1): 6.5, ("graph_ops", 4): 7.5}, {("graph_ops", 1): 6.7, ("graph_ops", 4): 7.3}],
        "new": [{("graph_ops", 1): 6.3}, {("graph_ops", 1): 6.1}],  # its B=4 runs failed
    }
    lines = table(variants, runs).splitlines()
    assert lines[0] == "| mode | B | old ms (runs) | new ms (runs) | new vs old |"
    assert lines[2] == "| graph_ops | 1 | 6.60 (6.50 / 6.70) | 6.20 (6.30 / 6.10) | -6.1% |"
    assert lines[3] == "| graph_ops | 4 | 7.40 (7.50 / 7.30) | - | - |"


def test_two_variants_on_the_cpu(tmp_path):
    out = tmp_path / "ab"
    result = subprocess.run(
        [sys.executable, str(ROOT / "perf" / "ab_step.py"), "--out", str(out), "--variant", "base",
         "--variant", f"rows8@{ROOT}=VOXCPM_SKINNY_PLAIN_ROWS=8", "--batches", "1", "--repeats", "1", "--no-throwaway",
         "--cpu-dry-run"],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads((out / "ab_step.json").read_text())
    assert summary["order"] == ["base_0", "rows8_0"]
    for name in ("base", "rows8"):
        (run,) = summary["runs"][name]
        assert [(r["mode"], r["batch"]) for r in run] == [("graph_ops", 1)] and run[0]["step_ms"] > 0
        assert (out / f"{name}_0" / "profile_step.json").is_file()
    assert "| graph_ops | 1 |" in (out / "ab_step.md").read_text()


def test_a_switch_that_profile_steps_modes_own_is_refused():
    with pytest.raises(ValueError, match="VOXCPM_FP8 is set by profile_step's --modes"):
        parse_variant("fp8=VOXCPM_FP8=1")


def test_a_run_without_result_says_why(tmp_path):
    log = tmp_path / "profile_step.log"
    log.write_text("loading\nprofile_step: needs a CUDA GPU (or --cpu-dry-run)\n\nab_step: profile_step exited with 2\n")
    assert last_line(log) == "profile_step: needs a CUDA GPU (or --cpu-dry-run)"
    log.write_text("")
    assert last_line(log) == "(its log is empty)"
