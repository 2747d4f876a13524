"""voxcpm_triton.serving.window_backlog: windows sent minus windows decoded across processes'
counter slots, and a gate that waits for the vocoder, however slow, but never stalls on windows that
were lost."""

import multiprocessing
import os
import threading
import time

import pytest

from voxcpm_triton.serving.window_backlog import BacklogGate, WindowCounter


def test_backlog_sums_every_writer(tmp_path):
    path = tmp_path / "backlog"
    decoders = [WindowCounter(path, "sent"), WindowCounter(path, "sent")]
    vocoder = WindowCounter(path, "decoded")
    decoders[0].add(3)
    decoders[1].add(4)
    vocoder.add(5)
    assert vocoder.backlog() == decoders[0].backlog() == 2
    for counter in (*decoders, vocoder):
        counter.close()
    assert list(tmp_path.iterdir()) == []


def test_gate_waits_for_the_vocoder(tmp_path):
    sent, decoded = WindowCounter(tmp_path / "b", "sent"), WindowCounter(tmp_path / "b", "decoded")
    gate = BacklogGate(sent, windows_ahead=2, max_wait_s=10.0)
    sent.add(6)  # 3 streams x 2 allowed: no wait
    started = time.monotonic()
    gate.wait(live_streams=3)
    assert time.monotonic() - started < 0.1
    sent.add(3)
    threading.Timer(0.2, decoded.add, args=(3,)).start()
    started = time.monotonic()
    gate.wait(live_streams=3)
    assert 0.15 < time.monotonic() - started < 5.0


def test_gate_takes_lost_windows_as_its_new_zero(tmp_path):
    sent = WindowCounter(tmp_path / "b", "sent")
    gate = BacklogGate(sent, windows_ahead=1, max_wait_s=0.05)
    sent.add(10)  # never decoded (e.g. sent to ar_decoder directly)
    gate.wait(live_streams=1)  # waits max_wait_s once ...
    started = time.monotonic()
    gate.wait(live_streams=1)  # ... then no more
    assert time.monotonic() - started < 0.04


def test_gate_waits_on_a_slow_vocoder_past_max_wait(tmp_path):
    # An overloaded vocoder decodes a window every 30 ms: the gate waits for it, well past
    # max_wait_s, instead of taking its backlog as lost.
    sent, decoded = WindowCounter(tmp_path / "b", "sent"), WindowCounter(tmp_path / "b", "decoded")
    gate = BacklogGate(sent, windows_ahead=1, max_wait_s=0.15)
    sent.add(9)
    stop = threading.Event()

    def vocoder() -> None:
        while not stop.wait(0.03):
            decoded.add(1)

    worker = threading.Thread(target=vocoder)
    worker.start()
    started = time.monotonic()
    gate.wait(live_streams=1)
    waited = time.monotonic() - started
    stop.set()
    worker.join()
    assert sent.backlog() <= 1 and waited > 0.2


def test_gate_waits_while_a_vocoder_is_mid_batch(tmp_path):
    # One batch longer than max_wait_s: nothing is decoded until it ends, yet nothing is lost.
    sent, decoded = WindowCounter(tmp_path / "b", "sent"), WindowCounter(tmp_path / "b", "decoded")
    gate = BacklogGate(sent, windows_ahead=1, max_wait_s=0.05, max_batch_s=10.0)
    sent.add(5)
    decoded.set_busy(True)

    def batch_ends() -> None:
        decoded.add(5)
        decoded.set_busy(False)

    threading.Timer(0.3, batch_ends).start()
    started = time.monotonic()
    gate.wait(live_streams=1)
    assert time.monotonic() - started > 0.25 and sent.backlog() == 0


def test_a_vocoder_that_died_mid_batch_stops_counting_as_decoding(tmp_path):
    sent, decoded = WindowCounter(tmp_path / "b", "sent"), WindowCounter(tmp_path / "b", "decoded")
    gate = BacklogGate(sent, windows_ahead=1, max_wait_s=0.05, max_batch_s=0.2)
    sent.add(5)
    decoded.set_busy(True)  # and never ends
    started = time.monotonic()
    gate.wait(live_streams=1)  # waits out max_batch_s, then max_wait_s, and takes the 5 as lost
    waited = time.monotonic() - started
    assert 0.2 < waited < 5.0
    started = time.monotonic()
    gate.wait(live_streams=1)
    assert time.monotonic() - started < 0.04


def test_a_light_decoder_does_not_wait_on_a_busy_ones_windows(tmp_path):
    # One decoder instance per GPU: 40 streams on one with 2 windows each in flight, 1 on the other.
    busy, light = WindowCounter(tmp_path / "b", "sent"), WindowCounter(tmp_path / "b", "sent")
    busy_gate = BacklogGate(busy, windows_ahead=2, max_wait_s=10.0)
    light_gate = BacklogGate(light, windows_ahead=2, max_wait_s=10.0)
    busy_gate.wait(live_streams=40)
    busy.add(80)
    light.add(2)
    started = time.monotonic()
    light_gate.wait(live_streams=1)  # 82 in flight for the server's 41 streams: within 2 each
    busy_gate.wait(live_streams=40)
    assert time.monotonic() - started < 0.1
    assert light.live() == busy.live() == 41
    busy.close()  # a stopped instance's streams no longer count
    assert light.live() == 1


def test_unknown_role_is_refused(tmp_path):
    with pytest.raises(ValueError, match="role='both'"):
        WindowCounter(tmp_path / "b", "both")


def _killed_while(path, role: str, action: str, value) -> None:
    """A process that takes a `role` slot of `path`, calls `action(value)` on it and dies without
    letting go (as a model process killed by a signal)."""
    def hold() -> None:
        counter = WindowCounter(path, role)
        getattr(counter, action)(value)
        os._exit(0)
    child = multiprocessing.get_context("fork").Process(target=hold)
    child.start()
    child.join(10)
    assert child.exitcode == 0


def test_a_vocoder_killed_mid_batch_stops_counting_as_decoding_at_once(tmp_path):
    sent = WindowCounter(tmp_path / "b", "sent")
    gate = BacklogGate(sent, windows_ahead=1, max_wait_s=0.05, max_batch_s=60.0)
    sent.add(5)
    _killed_while(tmp_path / "b", "decoded", "set_busy", True)
    started = time.monotonic()
    gate.wait(live_streams=1)  # max_wait_s, not max_batch_s: the batch's process is gone
    assert time.monotonic() - started < 5.0 and not sent.decoding(60.0)


def test_a_killed_decoders_live_streams_stop_counting(tmp_path):
    mine = WindowCounter(tmp_path / "b", "sent")
    mine.set_live(2)
    _killed_while(tmp_path / "b", "sent", "set_live", 7)
    assert mine.live() == 2
    mine.close()
    assert list(tmp_path.iterdir()) == []  # the killed one's claim does not keep the file
