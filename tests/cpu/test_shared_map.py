"""Shared tmpfs paths go with the last process that holds them (voxcpm_triton/serving/shared_map.py),
for each kind that uses it: the decoded-window board, the back-pressure counters, the cancel board,
the voices."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from voxcpm_triton.serving import shared_map
from voxcpm_triton.serving.cancel_board import CancelBoard
from voxcpm_triton.serving.window_acks import AckBoard
from voxcpm_triton.serving.window_backlog import WindowCounter
from voxcpm_triton.voice_cache import VoiceCache


def test_a_path_goes_with_its_last_claim_only(tmp_path):
    path = tmp_path / "voxcpm-acks-7"
    first, second = shared_map.claim(path), shared_map.claim(path)
    path.write_bytes(b"board")
    (tmp_path / "voxcpm-acks-70").write_bytes(b"another server's")  # a name that merely starts alike
    shared_map.release(path, first)
    assert path.exists() and not first.exists()
    shared_map.release(path, second)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["voxcpm-acks-70"]


def test_the_decoded_window_board_goes_with_its_last_process(tmp_path):
    path = tmp_path / "voxcpm-acks-7"
    vocoder, decoder = AckBoard(path), AckBoard(path)
    decoder.track("a")
    vocoder.ack("a")
    vocoder.close()
    assert decoder.decoded("a")[0] == 1  # still mapped and still there for the other process
    decoder.close()
    assert list(tmp_path.iterdir()) == []


def test_the_window_counters_go_with_their_last_process(tmp_path):
    path = tmp_path / "voxcpm-backlog-7"
    sent, decoded = WindowCounter(path, "sent"), WindowCounter(path, "decoded")
    sent.close()
    assert path.exists()
    decoded.close()
    assert list(tmp_path.iterdir()) == []


def test_a_servers_own_voice_folder_goes_with_its_last_cache_and_a_named_one_stays(tmp_path):
    own, named = tmp_path / "voxcpm-voices-7", tmp_path / "voices"
    first, second = VoiceCache(own, owned=True), VoiceCache(own, owned=True)
    (own / "0123.pt").touch()
    first.close()
    assert (own / "0123.pt").exists()
    second.close()
    assert not own.exists()
    kept = VoiceCache(named)
    (named / "0123.pt").touch()
    kept.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["voices"] and (named / "0123.pt").exists()


def test_the_cancel_board_stays_for_the_instances_still_running_and_goes_with_the_last(tmp_path):
    folder = tmp_path / "voxcpm-cancel-7"
    stopping, running = CancelBoard(folder), CancelBoard(folder)
    stopping.post("client-a")
    stopping.close()
    running.post("client-b")  # the board is still there for the instance that runs on
    assert running.take(["client-a", "client-b"]) == ["client-a", "client-b"]
    running.post("client-c")  # posted, never taken: it goes with the board
    running.close()
    assert list(tmp_path.iterdir()) == []


def test_a_killed_holders_claim_does_not_keep_the_path(tmp_path):
    path = tmp_path / "voxcpm-acks-7"
    mine = shared_map.claim(path)
    path.write_bytes(b"board")
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    (tmp_path / "voxcpm-acks-7.killed").write_text(str(killed.pid))  # its claim, never released
    killed.kill()
    try:
        deadline = time.monotonic() + 10
        while shared_map.process_alive(killed.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        # Not reaped yet, as Triton leaves a killed stub: a zombie is not alive.
        assert not shared_map.process_alive(killed.pid) and Path(f"/proc/{killed.pid}").exists()
        shared_map.release(path, mine)
    finally:
        killed.wait()
    assert list(tmp_path.iterdir()) == []


def test_a_claim_being_written_or_of_a_live_process_keeps_the_path(tmp_path):
    path = tmp_path / "voxcpm-acks-7"
    mine = shared_map.claim(path)
    assert mine.read_text() == str(os.getpid())
    path.write_bytes(b"board")
    (tmp_path / "voxcpm-acks-7.new").write_text("")  # its holder has not written its PID yet
    shared_map.release(path, mine)
    assert path.exists()
