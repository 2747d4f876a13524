"""First-response latency from a perf_analyzer profile export (the layout perf_analyzer 2.51 writes)."""

from __future__ import annotations

import json

import pytest

from perf.perf_analyzer_export import experiment_rows, main


def export(requests):
    return {"experiments": [{"experiment": {"mode": "concurrency", "value": 2}, "requests": requests,
                             "window_boundaries": [0, 1]}], "version": "2.51.0"}


def test_first_and_last_response_latency(tmp_path):
    ms = 1_000_000
    data = export([
        {"timestamp": 1000 * ms, "sequence_id": 0, "response_timestamps": [1010 * ms, 1170 * ms, 1330 * ms]},
        {"timestamp": 2000 * ms, "sequence_id": 0, "response_timestamps": [2030 * ms, 2190 * ms]},
        {"timestamp": 3000 * ms, "sequence_id": 0, "response_timestamps": []},  # never answered: counted apart
    ])
    (row,) = experiment_rows(data)
    assert row["requests"] == 2 and row["unanswered"] == 1 and row["value"] == 2
    assert row["first_ms_p50"] == pytest.approx(20.0)
    assert row["last_ms_p50"] == pytest.approx((330 + 190) / 2)
    assert row["responses_per_request"] == pytest.approx(2.5)
    path = tmp_path / "pa.json"
    path.write_text(json.dumps(data))
    assert main([str(path), "--out", str(tmp_path / "pa.md")]) == 0
    assert "| concurrency | 2 | 2 | 1 | 20.0 |" in (tmp_path / "pa.md").read_text()


def test_no_exports_is_an_error(tmp_path):
    assert main([str(tmp_path / "missing.json"), "--out", str(tmp_path / "pa.md")]) == 1
