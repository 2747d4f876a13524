"""The benchmark's streaming load harness against the real server: every request of a level gets its
audio, its final flag and its own record, also with several rounds per client."""

import pytest

from perf.stream_load import LoadRunner
from perf.stream_metrics import summarise_level
from perf.triton_metrics import LevelMetrics

pytestmark = pytest.mark.server

PATCHES = 3


def test_load_runner_level_with_rounds(triton_server):
    runner = LoadRunner(triton_server.grpc_url, patches=PATCHES, patch_seconds=0.16, seed=7, request_timeout_s=120)
    records = runner.run_level(concurrency=3, rounds=2, first_index=0)
    assert sorted(r.request_id for r in records) == [f"load-{i}" for i in range(6)]
    assert all(r.error is None for r in records), [r.error for r in records]
    assert runner.sample_rate == 48000
    samples_per_patch = 7680
    for record in records:
        assert record.first_audio_at is not None and record.finished_at >= record.first_audio_at
        # the tiny checkpoint's stop head may end a stream early, never late
        assert 0 < record.audio_samples <= PATCHES * samples_per_patch
        assert record.audio_samples % samples_per_patch == 0
    summary = summarise_level(records, 3, runner.sample_rate)
    assert summary.failed == 0 and summary.throughput_audio_s_per_s > 0
    assert triton_server.wait_idle() == 0


def test_load_runner_reports_server_errors(triton_server):
    runner = LoadRunner(triton_server.grpc_url, patches=PATCHES, patch_seconds=0.16, seed=7, request_timeout_s=60)
    runner.max_seconds = 10_000.0  # outside MAX_SECONDS' allowed range: every request is refused
    records = runner.run_level(concurrency=2, rounds=1, first_index=0)
    assert len(records) == 2
    assert all(r.error and "MAX_SECONDS" in r.error for r in records), [r.error for r in records]
    assert triton_server.wait_idle() == 0


def test_level_metrics_attribute_the_level_to_each_model(triton_server):
    runner = LoadRunner(triton_server.grpc_url, patches=PATCHES, patch_seconds=0.16, seed=11, request_timeout_s=120)
    metrics = LevelMetrics(f"http://127.0.0.1:{triton_server.metrics_port}/metrics",
                           f"http://{triton_server.http_url}/v2/models/stats", runner.run_level)
    records = metrics.run_level(2, 1, 0)
    assert all(r.error is None for r in records), [r.error for r in records]
    rows = {row["model"]: row for row in metrics.details()["served_models"]}
    assert rows["text_encoder"]["requests"] == 2 and rows["voxcpm"]["requests"] == 2
    # one vocoder request per audio chunk streamed; the dynamic batcher may have merged the two streams'
    assert rows["vocoder"]["requests"] == sum(r.chunks for r in records)
    assert 1 <= rows["vocoder"]["executions"] <= rows["vocoder"]["requests"]
    assert 0 < rows["vocoder"]["busy_pct"] <= 100
    assert triton_server.wait_idle() == 0
