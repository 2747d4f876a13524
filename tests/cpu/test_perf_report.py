"""Report rendering: per-system tables, ratios against baselines, the sweep's JSON and time box."""

from __future__ import annotations

import json

import pytest

from perf.report import main as report_main
from perf.report import ratio, render_markdown
from perf.stream_metrics import StreamRecord
from perf.sweep import parse_levels, run_sweep

RATE = 16000


def fake_level(step_s: float):
    """A system whose streams take `step_s` per patch-sized chunk, 10 chunks each."""

    def run_level(concurrency: int, rounds: int, first_index: int) -> list[StreamRecord]:
        records = []
        for i in range(concurrency * rounds):
            r = StreamRecord(f"req{first_index + i}", sent_at=0.0)
            for k in range(10):
                r.add_chunk(1600, step_s * (k + 1) * concurrency)
            r.finished_at = step_s * 10 * concurrency
            records.append(r)
        return records

    return run_level


def test_sweep_writes_levels_and_respects_budget(tmp_path):
    out = tmp_path / "fast.json"
    result = run_sweep("fast", fake_level(0.01), RATE, [1, 2, 4], out, warmup=1, meta={"notes": "x"})
    assert [lv["concurrency"] for lv in result["levels"]] == [1, 2, 4]
    assert json.loads(out.read_text())["levels"][2]["requests"] == 4
    skipped = run_sweep("slow", fake_level(0.01), RATE, [1, 2], tmp_path / "s.json", warmup=0, budget_s=-1)
    assert skipped["levels"] == [] and skipped["skipped_levels"] == [1, 2]


def test_markdown_has_every_system_and_ratios(tmp_path):
    a = run_sweep("ours", fake_level(0.01), RATE, [1, 4], tmp_path / "a.json", warmup=0)
    b = run_sweep("peer", fake_level(0.04), RATE, [1, 4], tmp_path / "b.json", warmup=0)
    served = run_sweep("ours served", fake_level(0.02), RATE, [1, 4], tmp_path / "c.json", warmup=0)
    text = render_markdown([a, b, served])
    assert "## ours" in text and "## peer" in text
    assert "## Ratios: ours against each baseline" in text
    assert "## Ratios: ours served against each baseline" in text
    assert "throughput x vs peer" in text and "x vs ours served" not in text
    # ours streams 4x faster: 4x the throughput, a quarter of the first-audio time
    row_c4 = [line for line in text.splitlines() if line.startswith("| 4 |") and line.count("|") == 4][0]
    assert row_c4.split("|")[2].strip() == "4.00" and row_c4.split("|")[3].strip() == "0.25"


def test_runs_of_other_lengths_or_gpus_get_no_ratios(tmp_path):
    ours = run_sweep("ours", fake_level(0.01), RATE, [1], tmp_path / "a.json", warmup=0,
                     meta={"patches": 50, "gpu": "NVIDIA H200"})
    same = run_sweep("peer", fake_level(0.04), RATE, [1], tmp_path / "b.json", warmup=0,
                     meta={"patches": 50, "gpu": "NVIDIA H200"})
    other_card = run_sweep("old", fake_level(0.04), RATE, [1], tmp_path / "c.json", warmup=0,
                           meta={"patches": 50, "gpu": "NVIDIA H100 80GB HBM3"})
    shorter = run_sweep("short", fake_level(0.04), RATE, [1], tmp_path / "d.json", warmup=0,
                        meta={"patches": 10, "gpu": "NVIDIA H200"})
    unknown = run_sweep("cpu", fake_level(0.04), RATE, [1], tmp_path / "e.json", warmup=0)
    text = render_markdown([ours, same, other_card, shorter])
    assert "throughput x vs peer" in text
    assert "No ratios of ours against old: gpu NVIDIA H200 vs NVIDIA H100 80GB HBM3." in text
    assert "No ratios of ours against short: patches 50 vs 10." in text
    assert "x vs old" not in text and "x vs short" not in text
    assert unknown["meta"]["gpu"] == "none"  # what run_sweep records on a machine without a GPU


def test_level_details_reach_the_json_and_the_report(tmp_path):
    calls = []

    def details():
        calls.append(1)
        return {"served_models": [{"model": "vocoder", "requests": 10 * len(calls), "executions": 5, "batch": 2.0,
                                   "failed": 0, "request_ms": 1.0, "queue_ms": 0.5, "compute_input_ms": 0.1,
                                   "compute_infer_ms": 3.0, "compute_output_ms": 0.2, "busy_pct": 12.0}]}

    out = tmp_path / "served.json"
    result = run_sweep("ours served", fake_level(0.01), RATE, [1, 4], out, warmup=1, level_details=details)
    assert len(calls) == 2  # once per level, not for the warm-up
    saved = json.loads(out.read_text())["levels"]
    assert [lv["served_models"][0]["requests"] for lv in saved] == [10, 20]
    text = render_markdown([result])
    assert "| c=1 | vocoder | 10 | 5 | 2.0 | 0 |" in text and "| c=4 | vocoder | 20 |" in text
    assert "Per model inside tritonserver" not in render_markdown([run_sweep("plain", fake_level(0.01), RATE, [1],
                                                                              tmp_path / "p.json", warmup=0)])


def test_ratio_handles_missing():
    assert ratio(None, 1.0) is None and ratio(1.0, 0.0) is None and ratio(2.0, 4.0) == 0.5


def test_report_cli_writes_summary(tmp_path):
    run_sweep("ours", fake_level(0.01), RATE, [1], tmp_path / "a.json", warmup=0)
    assert report_main([str(tmp_path / "rep"), str(tmp_path / "a.json"), str(tmp_path / "missing.json")]) == 0
    assert "## ours" in (tmp_path / "rep" / "summary.md").read_text()


def test_parse_levels_validates():
    assert parse_levels("1,4,16") == [1, 4, 16]
    with pytest.raises(Exception, match="integers"):
        parse_levels("1,0")


def test_low_levels_get_more_rounds(tmp_path):
    seen = []

    def run_level(concurrency, rounds, first_index):
        seen.append((concurrency, rounds))
        return fake_level(0.01)(concurrency, rounds, first_index)

    result = run_sweep("ours", run_level, RATE, [1, 4, 16], tmp_path / "r.json", min_requests=8, warmup=0)
    assert seen == [(1, 8), (4, 2), (16, 1)]
    assert [lv["requests"] for lv in result["levels"]] == [8, 8, 16]
