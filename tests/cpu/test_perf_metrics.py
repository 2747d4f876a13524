"""Harness arithmetic: percentiles, per-stream RTF and the per-level summary."""

from __future__ import annotations

import numpy as np
import pytest

from perf.gpu_memory import parse_memory_used
from perf.stream_metrics import StreamRecord, percentile, summarise_level

RATE = 48000


def record(rid: str, sent: float, first: float, end: float, samples: int) -> StreamRecord:
    r = StreamRecord(rid, sent_at=sent)
    r.add_chunk(0, sent + 0.001)  # empty chunk (e.g. a final-flag-only response) is not first audio
    r.add_chunk(samples // 2, first)
    r.add_chunk(samples - samples // 2, end)
    r.finished_at = end
    return r


@pytest.mark.parametrize("q", [0, 1, 50, 90, 99, 100])
def test_percentile_matches_numpy(q):
    values = list(np.random.default_rng(0).exponential(size=37))
    assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_percentile_rejects_bad_input():
    with pytest.raises(ValueError, match="empty"):
        percentile([], 50)
    with pytest.raises(ValueError, match=r"\[0, 100\]"):
        percentile([1.0], 101)


def test_stream_rtf_uses_time_after_first_audio():
    r = record("a", sent=10.0, first=10.2, end=12.2, samples=4 * RATE)
    assert r.first_audio_s() == pytest.approx(0.2)
    assert r.rtf(RATE) == pytest.approx(2.0 / 4.0)
    assert r.wall_over_audio(RATE) == pytest.approx(2.2 / 4.0)
    assert r.chunks == 3


def test_incomplete_stream_raises_with_its_id():
    r = StreamRecord("lost", sent_at=0.0)
    with pytest.raises(ValueError, match="lost"):
        r.wall_s()


def test_level_summary_counts_failures_and_throughput():
    good = [record(f"r{i}", sent=0.0, first=0.1 * (i + 1), end=2.0 + i, samples=8 * RATE) for i in range(4)]
    failed = StreamRecord("bad", sent_at=0.0, error="server said no")
    s = summarise_level(good + [failed], concurrency=5, sample_rate=RATE, gpu_memory_used_mib=1234.0)
    assert (s.requests, s.failed) == (5, 1)
    assert s.errors == ["server said no"]
    assert s.first_audio_ms_p50 == pytest.approx(250.0)
    assert s.audio_s_total == pytest.approx(32.0)
    assert s.makespan_s == pytest.approx(5.0)
    assert s.throughput_audio_s_per_s == pytest.approx(32.0 / 5.0)
    assert s.rtf_p50 == pytest.approx(float(np.median([(2.0 + i - 0.1 * (i + 1)) / 8 for i in range(4)])))
    assert s.gpu_memory_used_mib == 1234.0


def test_level_summary_of_only_failures_has_no_latency():
    s = summarise_level([StreamRecord("x", sent_at=0.0, error="boom")], 1, RATE)
    assert s.failed == 1 and s.first_audio_ms_p50 is None and s.throughput_audio_s_per_s is None


def test_parse_nvidia_smi_memory():
    assert parse_memory_used("1024\n2048\n", 1) == 2048.0
    assert parse_memory_used("", 0) is None
    assert parse_memory_used("[N/A]\n", 0) is None
