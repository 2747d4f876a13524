"""collector_paused: automatic garbage collection stays off while any capture holds the pause, and
comes back as it was when the last one ends (captures may overlap across threads)."""

from __future__ import annotations

import gc
import threading
import weakref

from voxcpm_triton.engine.collector_pause import collector_paused


def test_pause_collects_first_then_disables_until_the_block_ends():
    class Cycle:
        def __init__(self) -> None:
            self.me = self

    gc.enable()
    cycle = weakref.ref(Cycle())  # unreachable at once, freed only by a collection
    with collector_paused():
        assert not gc.isenabled()
        assert cycle() is None
    assert gc.isenabled()


def test_overlapping_pauses_restore_only_when_the_last_one_ends():
    gc.enable()
    inner_started, inner_may_end = threading.Event(), threading.Event()

    def inner() -> None:
        with collector_paused():
            inner_started.set()
            inner_may_end.wait(5)

    worker = threading.Thread(target=inner)
    with collector_paused():
        worker.start()
        assert inner_started.wait(5)
    assert not gc.isenabled()  # the other thread's capture still holds it
    inner_may_end.set()
    worker.join(5)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    try:
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
