"""voxcpm_triton.serving.cancel_board: an id posted by one process is taken once by the one holding
that stream; unclaimed posts expire."""

import os
import time

from voxcpm_triton.serving import cancel_board
from voxcpm_triton.serving.cancel_board import CancelBoard


def test_posted_id_is_taken_once_by_its_holder(tmp_path):
    poster, holder = CancelBoard(tmp_path / "board"), CancelBoard(tmp_path / "board")
    poster.post("stream-7")
    assert holder.take(["stream-1", "stream-2"]) == []
    assert holder.take(["stream-1", "stream-7"]) == ["stream-7"]
    assert holder.take(["stream-7"]) == []


def test_unclaimed_posts_expire(tmp_path):
    board = CancelBoard(tmp_path / "board")
    board.post("gone")
    old = time.time() - cancel_board.STALE_AFTER_S - 1
    for path in (tmp_path / "board").iterdir():
        os.utime(path, (old, old))
    assert board.take(["other"]) == []
    assert list((tmp_path / "board").iterdir()) == []
