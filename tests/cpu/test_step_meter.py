"""voxcpm_triton.serving.step_meter: totals reach the publisher at most once per period, and a
flush hands over whatever is left."""

from voxcpm_triton.serving.step_meter import StepMeter, StepTotals


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_totals_go_out_once_per_period_then_on_flush():
    clock, published = Clock(), []
    meter = StepMeter(published.append, period_s=1.0, clock=clock)
    meter.record(4, gate_s=0.001, step_s=0.010, handoff_s=0.0)
    clock.now = 0.5
    meter.record(4, gate_s=0.0, step_s=0.012, handoff_s=0.002)
    assert published == []
    clock.now = 1.0
    meter.record(3, gate_s=0.0, step_s=0.011, handoff_s=0.0)
    assert len(published) == 1
    first = published[0]
    assert (first.steps, first.stream_steps) == (3, 11)
    assert abs(first.step_s - 0.033) < 1e-12 and abs(first.gate_s - 0.001) < 1e-12
    assert abs(first.handoff_s - 0.002) < 1e-12
    clock.now = 1.2
    meter.record(1, gate_s=0.0, step_s=0.005, handoff_s=0.0)
    assert len(published) == 1  # the period restarted at the last publish
    meter.flush()
    assert published[1] == StepTotals(steps=1, stream_steps=1, step_s=0.005)


def test_flush_with_nothing_recorded_publishes_nothing():
    published = []
    meter = StepMeter(published.append, clock=Clock())
    meter.flush()
    assert published == []
