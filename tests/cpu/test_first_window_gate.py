"""voxcpm_triton.serving.first_window_gate: the decoder waits for new streams' first windows only
while few streams are live, only for streams with a Triton request id, and never past its limit."""

from __future__ import annotations

import pytest

from voxcpm_triton.serving.first_window_gate import FirstWindowGate


class Board:
    """Decoded windows per request id; each poll (sleep) lets the vocoder decode what `arrivals`
    says for that poll."""

    def __init__(self, arrivals: dict[int, list[str]] | None = None) -> None:
        self.counts: dict[str, int] = {}
        self.arrivals = arrivals or {}
        self.polls = 0
        self.now = 0.0

    def decoded(self, request_id):
        count = self.counts.get(request_id, 0)
        return (count, self.now) if count else None

    def sleep(self, seconds):
        self.now += seconds
        self.polls += 1
        for request_id in self.arrivals.get(self.polls, []):
            self.counts[request_id] = self.counts.get(request_id, 0) + 1


def gate(board: Board, wait_s: float = 0.01, max_streams: int = 4) -> FirstWindowGate:
    return FirstWindowGate(board, wait_s, max_streams, poll_s=0.001, clock=lambda: board.now, sleep=board.sleep)


def test_waits_until_every_first_window_is_decoded():
    board = Board({2: ["a"], 5: ["b"]})
    gate(board).wait(["a#0", "b#1"], live_streams=2)
    assert board.polls == 5  # returned at the poll that saw b's window, not before


def test_gives_up_after_its_limit():
    board = Board()  # the vocoder never decodes it
    gate(board, wait_s=0.01).wait(["a#0"], live_streams=1)
    assert board.now == pytest.approx(0.01) and board.polls == 10


def test_many_live_streams_do_not_wait():
    board = Board()
    gate(board, max_streams=4).wait(["a#0"], live_streams=5)
    assert board.polls == 0


def test_streams_without_a_request_id_are_not_waited_for():
    board = Board()
    gate(board).wait(["#0", "#1"], live_streams=2)  # the ar_decoder names a stream `<Triton id>#<n>`
    assert board.polls == 0


def test_a_window_decoded_before_the_wait_returns_at_once():
    board = Board()
    board.counts["a"] = 1
    gate(board).wait(["a#0"], live_streams=1)
    assert board.polls == 0


@pytest.mark.parametrize("wait_s, max_streams", [(0.0, 4), (0.01, 0)])
def test_settings_must_be_positive(wait_s, max_streams):
    with pytest.raises(ValueError):
        FirstWindowGate(Board(), wait_s, max_streams)
