"""The two breakdown tools' arithmetic: Triton's per-model metrics diffed between snapshots, and the
in-process step breakdown's timer and table."""

from __future__ import annotations

import time

from perf.step_breakdown import PartTimer, breakdown_row, markdown
from perf.triton_metrics import per_model
from perf.triton_metrics import markdown as metrics_markdown


def snapshot(vocoder_requests: int, vocoder_execs: int, queue_us: float, infer_us: float) -> str:
    return "\n".join([
        "# HELP nv_inference_request_success Number of successful inference requests",
        "# TYPE nv_inference_request_success counter",
        f'nv_inference_request_success{{model="vocoder",version="1"}} {vocoder_requests}',
        'nv_inference_request_success{model="text_encoder",version="1"} 4',
        f'nv_inference_exec_count{{model="vocoder",version="1"}} {vocoder_execs}',
        f'nv_inference_queue_duration_us{{model="vocoder",version="1"}} {queue_us}',
        f'nv_inference_compute_infer_duration_us{{model="vocoder",version="1"}} {infer_us}',
        'nv_inference_request_failure{model="vocoder",reason="BACKEND",version="1"} 0',
        'nv_gpu_utilization{gpu_uuid="GPU-1"} 0.5',
    ])


def test_metrics_diff_per_request_and_batch():
    rows = per_model(snapshot(100, 10, 5000.0, 80000.0), snapshot(300, 20, 9000.0, 280000.0))
    assert [row["model"] for row in rows] == ["vocoder"]  # text_encoder completed nothing in between
    row = rows[0]
    assert (row["requests"], row["executions"], row["failed"]) == (200, 10, 0)
    assert row["batch"] == 20.0
    assert row["queue_ms"] == 4000.0 / 200 / 1000
    assert row["compute_infer_ms"] == 200000.0 / 200 / 1000
    table = metrics_markdown(rows, "c=16")
    assert "| c=16 | vocoder | 200 | 10 | 20.0 | 0 |" in table


def test_part_timer_and_table():
    timer = PartTimer("cpu")
    slow = timer.wrap("decode", lambda: time.sleep(0.01) or 7)
    assert slow() == 7 and slow() == 7
    assert timer.calls["decode"] == 2 and timer.seconds["decode"] >= 0.02
    row = breakdown_row(4, wall_s=0.1, patches=8, timer=timer)
    assert row["parts_s"]["prefill"] == 0.0 and abs(row["host_s"] - (0.1 - timer.seconds["decode"])) < 1e-12
    line = markdown([row]).splitlines()[-1]
    assert line.startswith("| 4 | 0.10 | 8 | 0.0 (0, 0.00) |")
    timer.reset()
    assert not timer.calls
