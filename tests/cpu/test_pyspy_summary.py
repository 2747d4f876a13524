"""perf/pyspy_summary.py: py-spy's raw stacks counted per thread, per frame (self and inclusive), and
the samples' share of the wall time."""

from __future__ import annotations

import pytest

from perf.pyspy_summary import parse, render

RAW = """\
thread (0x7F01): engine;Thread.run (threading.py:982);run (engine_loop.py:80);step (engine.py:120);replay (cuda_graphs.py:40) 60
thread (0x7F01): engine;run (engine_loop.py:80);step (engine.py:131);book (scheduler.py:12) 20
thread (4012): Thread-3 (deliver);deliver (engine_loop.py:200);send_window (model.py:40) 15
thread (4013): Thread-4 (deliver);deliver (engine_loop.py:200);send_window (model.py:41) 5
"""


def test_counts_per_thread_and_frame():
    recording = parse(RAW.splitlines())
    assert recording.samples == 100
    # Numbered threads of one pool are one row.
    assert recording.threads == {"engine": 80, "Thread (deliver)": 20}
    # Self: the last frame; two line numbers of one function are one entry.
    assert recording.self_frames["engine: replay (cuda_graphs.py)"] == 60
    assert recording.self_frames["Thread (deliver): send_window (model.py)"] == 20
    # Inclusive: every frame of a stack once.
    assert recording.inclusive_frames["engine: step (engine.py)"] == 80
    assert recording.inclusive_frames["engine: run (engine_loop.py)"] == 80
    assert not any("threading.py" in frame for frame in recording.inclusive_frames)


def test_render_shares_of_wall_time():
    table = render("gil", parse(RAW.splitlines()), top=1, rate=100.0, seconds=2.0)
    # 100 samples of 200 asked for: some thread held the GIL half the time.
    assert "100 samples, 50.0% of 100/s x 2 s" in table
    assert "| engine | 80 | 80.0% |" in table
    assert "| engine: replay (cuda_graphs.py) | 60 | 60.0% |" in table
    assert "send_window" not in table.split("inclusive")[0]  # only the top self frame


def test_rejects_other_formats():
    with pytest.raises(ValueError, match="not a py-spy raw line"):
        parse(["<svg>"])
