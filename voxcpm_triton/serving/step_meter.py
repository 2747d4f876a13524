"""Where the ar_decoder's engine thread spends its time, as running totals for Prometheus counters.

Per step the engine thread may wait for the vocoder's back-pressure gate, then runs the step, then
hands the outputs to the delivery threads (it waits there while one of them is still sending two
steps back). Served throughput below what the step alone allows shows up in these shares.

Publishing a Triton custom metric is a round trip to the server process, so the totals go out at
most every `period_s` (and whenever the engine runs out of work, so that a finished load leaves
complete counters), not once per step.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable


@dataclass
class StepTotals:
    steps: int = 0
    stream_steps: int = 0  # streams summed over steps: the patches the steps produced
    step_s: float = 0.0  # in Engine.step: admissions (prefill) and the decode step
    gate_s: float = 0.0  # blocked by the back-pressure gate before a step
    handoff_s: float = 0.0  # blocked handing a step's outputs to a busy delivery thread

    def any(self) -> bool:
        return self.steps > 0 or self.gate_s > 0.0


# The ar_decoder's Prometheus counters of StepTotals: (metric name, StepTotals field, description).
# perf/triton_metrics.py reads them back by these names.
COUNTERS = (
    ("voxcpm_decode_steps_total", "steps", "Engine steps run"),
    ("voxcpm_decode_stream_steps_total", "stream_steps", "Streams summed over engine steps (patches made)"),
    ("voxcpm_decode_step_seconds_total", "step_s", "Seconds in engine steps (admissions and decode)"),
    ("voxcpm_decode_gate_seconds_total", "gate_s", "Seconds the engine waited for the vocoder's back-pressure"),
    ("voxcpm_decode_handoff_seconds_total", "handoff_s",
     "Seconds the engine waited for a delivery thread still sending earlier steps"),
)


class StepMeter:
    """Accumulates per-step times from the engine thread and passes `publish` what accrued since
    its last call."""

    def __init__(self, publish: Callable[[StepTotals], None], period_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._publish = publish
        self._period_s = period_s
        self._clock = clock
        self._pending = StepTotals()
        self._last_publish = clock()

    def record(self, streams: int, gate_s: float, step_s: float, handoff_s: float) -> None:
        pending = self._pending
        pending.steps += 1
        pending.stream_steps += streams
        pending.step_s += step_s
        pending.gate_s += gate_s
        pending.handoff_s += handoff_s
        if self._clock() - self._last_publish >= self._period_s:
            self.flush()

    def flush(self) -> None:
        if self._pending.any():
            totals, self._pending = self._pending, StepTotals()
            self._publish(totals)
        self._last_publish = self._clock()
