"""Per-stream timings and the per-concurrency summary every benchmark reports.

Definitions (the same for every system, so the tables compare like with like):
- first audio: time from sending the request to receiving its first non-empty audio chunk;
- RTF: (wall - first audio) / audio seconds, the definition Nano-vLLM-VoxCPM publishes;
- wall/audio: plain wall time of the request over its audio seconds;
- throughput: audio seconds of all requests of a level over the level's makespan (first send to last
  final chunk), i.e. how much audio the system produced per second while serving that concurrency.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Optional, Sequence


@dataclass
class StreamRecord:
    """What the client saw of one request; times are `time.perf_counter()` seconds."""

    request_id: str
    sent_at: float
    first_audio_at: Optional[float] = None
    finished_at: Optional[float] = None
    audio_samples: int = 0
    chunks: int = 0
    error: Optional[str] = None

    def add_chunk(self, samples: int, now: float) -> None:
        if samples < 0:
            raise ValueError(f"chunk sample count must be >= 0, got {samples}")
        if samples and self.first_audio_at is None:
            self.first_audio_at = now
        self.audio_samples += samples
        self.chunks += 1

    @property
    def ok(self) -> bool:
        return self.error is None and self.first_audio_at is not None and self.finished_at is not None

    def first_audio_s(self) -> float:
        return self._require(self.first_audio_at) - self.sent_at

    def wall_s(self) -> float:
        return self._require(self.finished_at) - self.sent_at

    def audio_s(self, sample_rate: int) -> float:
        if sample_rate <= 0:
            raise ValueError(f"sample_rate must be > 0, got {sample_rate}")
        return self.audio_samples / sample_rate

    def rtf(self, sample_rate: int) -> float:
        """(wall - first audio) / audio seconds."""
        return (self.wall_s() - self.first_audio_s()) / self._audio_or_raise(sample_rate)

    def wall_over_audio(self, sample_rate: int) -> float:
        return self.wall_s() / self._audio_or_raise(sample_rate)

    def _audio_or_raise(self, sample_rate: int) -> float:
        audio = self.audio_s(sample_rate)
        if audio <= 0:
            raise ValueError(f"request {self.request_id} produced no audio")
        return audio

    def _require(self, value: Optional[float]) -> float:
        if value is None:
            raise ValueError(f"request {self.request_id} is incomplete (error={self.error!r})")
        return value


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default method); q in [0, 100]."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    if not values:
        raise ValueError("percentile of an empty sequence")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class LevelSummary:
    """One concurrency level of one system; latencies in milliseconds."""

    concurrency: int
    requests: int
    failed: int
    first_audio_ms_p50: Optional[float] = None
    first_audio_ms_p90: Optional[float] = None
    first_audio_ms_p99: Optional[float] = None
    rtf_p50: Optional[float] = None
    rtf_p90: Optional[float] = None
    rtf_mean: Optional[float] = None
    wall_over_audio_p50: Optional[float] = None
    wall_over_audio_mean: Optional[float] = None
    audio_s_per_request_min: Optional[float] = None
    audio_s_per_request_max: Optional[float] = None
    audio_s_total: float = 0.0
    makespan_s: Optional[float] = None
    throughput_audio_s_per_s: Optional[float] = None
    gpu_memory_used_mib: Optional[float] = None
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def summarise_level(
    records: Sequence[StreamRecord],
    concurrency: int,
    sample_rate: int,
    gpu_memory_used_mib: Optional[float] = None,
) -> LevelSummary:
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    good = [r for r in records if r.ok and r.audio_samples > 0]
    bad = [r for r in records if r not in good]
    summary = LevelSummary(
        concurrency=concurrency,
        requests=len(records),
        failed=len(bad),
        gpu_memory_used_mib=gpu_memory_used_mib,
        errors=sorted({r.error or "no audio / not finished" for r in bad})[:5],
    )
    if not good:
        return summary
    first = [r.first_audio_s() * 1000 for r in good]
    rtf = [r.rtf(sample_rate) for r in good]
    wall_ratio = [r.wall_over_audio(sample_rate) for r in good]
    audio = [r.audio_s(sample_rate) for r in good]
    makespan = max(r.finished_at for r in good) - min(r.sent_at for r in records)
    summary.first_audio_ms_p50 = percentile(first, 50)
    summary.first_audio_ms_p90 = percentile(first, 90)
    summary.first_audio_ms_p99 = percentile(first, 99)
    summary.rtf_p50 = percentile(rtf, 50)
    summary.rtf_p90 = percentile(rtf, 90)
    summary.rtf_mean = sum(rtf) / len(rtf)
    summary.wall_over_audio_p50 = percentile(wall_ratio, 50)
    summary.wall_over_audio_mean = sum(wall_ratio) / len(wall_ratio)
    summary.audio_s_per_request_min = min(audio)
    summary.audio_s_per_request_max = max(audio)
    summary.audio_s_total = sum(audio)
    summary.makespan_s = makespan
    summary.throughput_audio_s_per_s = sum(audio) / makespan if makespan > 0 else None
    return summary
