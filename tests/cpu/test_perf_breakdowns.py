"""The two breakdown tools' arithmetic: Triton's per-model metrics diffed between snapshots, and the
in-process step breakdown's timer and table."""

from __future__ import annotations

import json
import time

from perf.step_breakdown import PartTimer, breakdown_row, markdown
from perf.triton_metrics import LevelMetrics, busy_ms, decode_markdown, per_model
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
    assert "busy_pct" not in row
    table = metrics_markdown([("c=16", rows)])
    assert "| c=16 | vocoder | 200 | 10 | 20.0 | 0 |" in table and table.rstrip().endswith("| - |")


def decode_snapshot(steps: int, stream_steps: int, step_s: float, gate_s: float) -> str:
    labels = '{model="ar_decoder",instance="ar_decoder_0_0"}'
    return "\n".join([
        'nv_inference_request_success{model="ar_decoder",version="1"} ' + str(steps // 10),
        f"voxcpm_decode_steps_total{labels} {steps}",
        f"voxcpm_decode_stream_steps_total{labels} {stream_steps}",
        f"voxcpm_decode_step_seconds_total{labels} {step_s}",
        f"voxcpm_decode_gate_seconds_total{labels} {gate_s}",
        f"voxcpm_decode_handoff_seconds_total{labels} 0",
        f"voxcpm_live_slots{labels} 3",
    ])


def test_decoder_engine_time_per_step():
    rows = per_model(decode_snapshot(100, 400, 1.0, 0.0), decode_snapshot(300, 6800, 4.0, 0.5))
    assert rows[0]["decode"] == {"steps": 200, "stream_steps": 6400, "step_seconds": 3.0, "gate_seconds": 0.5,
                                 "handoff_seconds": 0.0}
    rows[0]["level_ms"] = 5000.0
    table = decode_markdown([("c=32", rows)])
    assert "| c=32 | 200 | 32.0 | 15.00 | 2.50 | 0.00 | 60 | 10 |" in table
    assert decode_markdown([("c=1", per_model(snapshot(1, 1, 0.0, 0.0), snapshot(2, 2, 0.0, 0.0)))]) == ""


def two_decoders(first: tuple[int, int, float], second: tuple[int, int, float]) -> str:
    """Counters of two ar_decoder instances (one per GPU), each (steps, stream_steps, step_s)."""
    lines = ['nv_inference_request_success{model="ar_decoder",version="1"} ' + str(first[0] + second[0])]
    for gpu, (steps, stream_steps, step_s) in enumerate((first, second)):
        labels = f'{{model="ar_decoder",instance="ar_decoder_0_{gpu}"}}'
        lines += [f"voxcpm_decode_steps_total{labels} {steps}",
                  f"voxcpm_decode_stream_steps_total{labels} {stream_steps}",
                  f"voxcpm_decode_step_seconds_total{labels} {step_s}",
                  f"voxcpm_decode_gate_seconds_total{labels} 0",
                  f"voxcpm_decode_handoff_seconds_total{labels} 0"]
    return "\n".join(lines)


def test_decoder_rows_per_instance_with_one_decoder_per_gpu():
    rows = per_model(two_decoders((10, 10, 0.1), (0, 0, 0.0)), two_decoders((110, 3210, 2.1), (0, 0, 0.0)))
    decode = rows[0]["decode"]
    assert (decode["steps"], decode["stream_steps"]) == (100, 3200)  # the instances summed
    assert rows[0]["decode_instances"]["ar_decoder_0_0"]["stream_steps"] == 3200
    assert rows[0]["decode_instances"]["ar_decoder_0_1"]["steps"] == 0
    rows[0]["level_ms"] = 4000.0
    table = decode_markdown([("c=64", rows)]).splitlines()
    assert table[2:] == ["| c=64 | 100 | 32.0 | 20.00 | 0.00 | 0.00 | 50 | 0 |",
                         "| c=64 ar_decoder_0_0 | 100 | 32.0 | 20.00 | 0.00 | 0.00 | 50 | 0 |",
                         "| c=64 ar_decoder_0_1 | 0 | - | - | - | - | - | - |"]
    # One instance (the test above): no per-instance lines.
    one = per_model(decode_snapshot(100, 400, 1.0, 0.0), decode_snapshot(300, 6800, 4.0, 0.5))
    assert "decode_instances" not in one[0]


def stats(batches: dict[int, tuple[int, int]]) -> dict:
    """A /v2/models/stats reply whose vocoder ran `count` executions of each batch size in `ns`."""
    def timing(count: int, ns: int) -> dict:
        return {"count": count, "ns": ns}

    return {"model_stats": [
        {"name": "vocoder", "batch_stats": [
            {"batch_size": size, "compute_input": timing(count, 0), "compute_infer": timing(count, ns),
             "compute_output": timing(count, 0)} for size, (count, ns) in batches.items()]},
        {"name": "voxcpm"},  # an ensemble has no executions of its own
    ]}


def test_busy_time_counts_each_execution_once():
    # 4 single-window executions of 25 ms and 1 of two windows taking 84 ms: 184 ms of work, where
    # the per-request mean (6 requests booked 268 ms) x 5 executions would claim 223.
    busy = busy_ms(stats({1: (2, 50_000_000)}), stats({1: (6, 150_000_000), 2: (1, 84_000_000)}))
    assert busy == {"vocoder": 184.0}


def test_level_metrics_brackets_each_level():
    # After each level the metrics are read until two readings agree: the first level's last
    # request is booked between the first and the second reading after it.
    snapshots = iter([snapshot(0, 0, 0.0, 0.0), stats({}),
                      snapshot(7, 2, 100.0, 8000.0), snapshot(8, 2, 100.0, 8000.0), snapshot(8, 2, 100.0, 8000.0),
                      stats({1: (2, 8_000_000)}),
                      snapshot(8, 2, 100.0, 8000.0), stats({1: (2, 8_000_000)}),
                      snapshot(40, 4, 300.0, 40000.0), snapshot(40, 4, 300.0, 40000.0),
                      stats({1: (2, 8_000_000), 16: (2, 30_000_000)})])
    fetched, levels = [], []

    def fetch(url: str) -> str:
        fetched.append(url)
        return json.dumps(next(snapshots)) if url.endswith("stats") else next(snapshots)

    def run_level(concurrency: int, rounds: int, first_index: int) -> list:
        levels.append((concurrency, rounds, first_index))
        time.sleep(0.05)
        return [concurrency]

    metrics = LevelMetrics("http://host/metrics", "http://host/v2/models/stats", run_level, fetch)
    assert metrics.run_level(1, 8, 0) == [1]
    first = metrics.details()["served_models"][0]
    assert first["requests"] == 8 and 0 < first["busy_pct"] < 8 / 50 * 100  # 8 ms in a level of >= 50 ms
    metrics.run_level(4, 2, 8)
    (row,) = metrics.details()["served_models"]
    assert (row["model"], row["requests"], row["executions"]) == ("vocoder", 32, 2)
    assert 0 < row["busy_pct"] < 30 / 50 * 100  # 30 ms of executions in a level of >= 50 ms
    assert levels == [(1, 8, 0), (4, 2, 8)]
    metrics_url, stats_url = "http://host/metrics", "http://host/v2/models/stats"
    assert fetched == [metrics_url, stats_url, metrics_url, metrics_url, metrics_url, stats_url,
                       metrics_url, stats_url, metrics_url, metrics_url, stats_url]


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
