"""The decoded-window board the vocoder stamps and the rule by which a decoder stream counts as
abandoned (voxcpm_triton/serving/window_acks.py)."""

from __future__ import annotations

import pytest

from voxcpm_triton.serving import window_acks
from voxcpm_triton.serving.window_acks import AckBoard, StreamWatch


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def boards(tmp_path, clock):
    """Two processes' views (vocoder, decoder) of one server's board file."""
    path = tmp_path / "voxcpm-acks-1"
    vocoder, decoder = AckBoard(path, clock), AckBoard(path, clock)
    yield vocoder, decoder
    vocoder.close()
    decoder.close()


def test_acks_are_counted_per_request_id_across_processes(boards, clock):
    vocoder, decoder = boards
    decoder.track("a")
    decoder.track("b")
    assert decoder.decoded("a") is None  # tracked, nothing decoded yet
    vocoder.ack("a")
    clock.now += 2
    vocoder.ack("a", 3)
    vocoder.ack("b")
    assert decoder.decoded("a") == (4, clock.now)
    assert decoder.decoded("b") == (1, clock.now)
    vocoder.ack("")  # requests without an id are not tracked
    assert decoder.decoded("") is None


def test_an_untracked_id_is_not_counted(boards, clock):
    vocoder, decoder = boards
    vocoder.ack("a")  # sent to the vocoder directly, or its stream long over
    decoder.track("a")
    assert decoder.decoded("a") is None


def test_windows_decoded_after_the_stream_ended_do_not_take_a_cell(boards, clock):
    vocoder, decoder = boards
    decoder.track("a")
    vocoder.ack("a")
    decoder.forget("a")
    assert decoder.decoded("a") is None
    vocoder.ack("a", 2)  # its last windows, still in flight when it ended
    assert decoder.decoded("a") is None
    # The cell is free at once, not after STALE_AFTER_S: as many streams as cells, one after another,
    # each stamped after its end, all find a cell.
    for i in range(window_acks.CELLS * 2):
        request_id = f"id-{i}"
        decoder.track(request_id)
        vocoder.ack(request_id)
        assert decoder.decoded(request_id) == (1, clock.now), request_id
        decoder.forget(request_id)
        vocoder.ack(request_id)


def test_a_full_table_leaves_new_ids_untracked_until_cells_go_stale(boards, clock):
    vocoder, decoder = boards
    ids = [f"id-{i}" for i in range(window_acks.CELLS * 2)]
    for request_id in ids:  # live streams, never ended
        decoder.track(request_id)
        vocoder.ack(request_id)
    lost = [request_id for request_id in ids if decoder.decoded(request_id) is None]
    assert lost, "a full table drops new ids (read as never acknowledged)"
    clock.now += window_acks.STALE_AFTER_S + 1
    decoder.track(lost[0])
    vocoder.ack(lost[0])
    assert decoder.decoded(lost[0]) == (1, clock.now)


def watch_sending(board: AckBoard, clock: Clock, windows: int) -> StreamWatch:
    watch = StreamWatch(board, "stream", clock)
    for _ in range(windows):
        watch.sent()
    return watch


def test_a_stream_opens_its_cell_with_its_first_window(boards, clock):
    vocoder, decoder = boards
    watch = StreamWatch(decoder, "queued", clock)
    vocoder.ack("queued")  # nothing sent yet: not counted
    clock.now += 2 * window_acks.STALE_AFTER_S  # queued in a full engine, holding no cell meanwhile
    watch.sent()
    vocoder.ack("queued")
    assert decoder.decoded("queued") == (1, clock.now)


def test_a_stream_never_acknowledged_is_never_abandoned(boards, clock):
    _, decoder = boards
    watch = watch_sending(decoder, clock, 100)  # e.g. sent to ar_decoder directly
    clock.now += 3600
    assert not watch.abandoned()


def test_a_stream_through_the_text_encoder_never_acknowledged_is_abandoned(boards, clock):
    # Its client left while it queued for a slot: the ensemble forwards none of its windows.
    _, decoder = boards
    encoder = AckBoard(decoder.path, clock)
    encoder.track("stream")  # the text_encoder prepared it
    watch = watch_sending(decoder, clock, window_acks.ABANDONED_WINDOWS)
    assert watch.expects_acks
    clock.now += window_acks.ABANDONED_AFTER_S + 0.1
    assert not watch.abandoned()  # first sight: only suspected
    clock.now += window_acks.CONFIRM_S
    assert watch.abandoned()
    encoder.close()


def test_a_stream_whose_cell_was_lost_is_not_abandoned(boards, clock):
    _, decoder = boards
    encoder = AckBoard(decoder.path, clock)
    encoder.track("stream")
    watch = watch_sending(decoder, clock, 10)
    encoder.forget("stream")  # as a racing write or a reused id could
    clock.now += 3600
    assert not watch.abandoned() and not watch.abandoned()
    encoder.close()


def test_a_stream_whose_windows_keep_being_decoded_is_not_abandoned(boards, clock):
    vocoder, decoder = boards
    watch = watch_sending(decoder, clock, 0)
    for _ in range(50):
        watch.sent()
        clock.now += 1.0
        vocoder.ack("stream")
        assert not watch.abandoned()


def test_a_stream_whose_windows_stopped_being_decoded_is_abandoned_after_a_confirmation(boards, clock):
    vocoder, decoder = boards
    watch = watch_sending(decoder, clock, 2)
    vocoder.ack("stream", 2)
    for _ in range(window_acks.ABANDONED_WINDOWS):
        watch.sent()
    assert not watch.abandoned()  # behind, but the last window was decoded just now
    clock.now += window_acks.ABANDONED_AFTER_S + 0.1
    assert not watch.abandoned()  # first sight: only suspected
    clock.now += window_acks.CONFIRM_S
    assert watch.abandoned()
    watch.ended()  # the decoder ended it: its cell is free again
    assert decoder.decoded("stream") is None


def test_a_late_window_clears_the_suspicion(boards, clock):
    vocoder, decoder = boards
    watch = watch_sending(decoder, clock, 1)
    vocoder.ack("stream")
    for _ in range(window_acks.ABANDONED_WINDOWS):
        watch.sent()
    clock.now += window_acks.ABANDONED_AFTER_S + 0.1
    assert not watch.abandoned()
    vocoder.ack("stream")  # the vocoder was only slow
    clock.now += window_acks.CONFIRM_S
    assert not watch.abandoned()


def test_fewer_windows_behind_than_the_threshold_is_not_abandoned(boards, clock):
    vocoder, decoder = boards
    watch = watch_sending(decoder, clock, 3)
    vocoder.ack("stream", 3)
    for _ in range(window_acks.ABANDONED_WINDOWS - 1):
        watch.sent()
    clock.now += 3600
    assert not watch.abandoned()
    assert not watch.abandoned()
