"""Two ar_decoder instances in one server (the CPU stand-in for one decoder per GPU): Triton spreads
streams over both, each stream stays in the instance that admitted it and equals its solo output,
and cancelling a stream in one instance leaves the streams of the other running and correct.

The server runs a copy of model_repository/ whose ar_decoder CPU config asks for two KIND_CPU
instances; the committed repository is unchanged. Which instance holds a stream is read from the
per-instance `voxcpm_live_slots` gauge."""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import server_with_decoder_config
from test_concurrent_streams import REQUESTS, _run

from client.streaming import VoxCPMClient

pytestmark = pytest.mark.server

ONE_INSTANCE = "instance_group [ { kind: KIND_CPU count: 1 } ]"
TWO_INSTANCES = "instance_group [ { kind: KIND_CPU count: 2 } ]"
SLOTS_SAMPLE = re.compile(r'^voxcpm_live_slots\{[^}]*instance="([^"]+)"[^}]*\} (\S+)$')
MAX_BURSTS = 5
LONG_SECONDS = 60.0  # never reached: the long streams are cancelled (the checkpoint never stops)


@pytest.fixture(scope="module")
def two_decoders(tiny_checkpoint, tmp_path_factory):
    yield from server_with_decoder_config(tiny_checkpoint, tmp_path_factory.mktemp("two-decoders"), ONE_INSTANCE, TWO_INSTANCES)


@pytest.fixture(scope="module")
def solo_outputs(two_decoders) -> list[list[np.ndarray]]:
    return [_run(two_decoders.grpc_url, *request) for request in REQUESTS]


def slots_by_instance(server) -> dict[str, float]:
    slots = {}
    for line in server.metrics().splitlines():
        match = SLOTS_SAMPLE.match(line)
        if match:
            slots[match.group(1)] = float(match.group(2))
    return slots


def wait_slots(server, expected: dict[str, float], timeout_s: float = 10.0) -> dict[str, float]:
    deadline = time.monotonic() + timeout_s
    slots = slots_by_instance(server)
    while slots != expected and time.monotonic() < deadline:
        time.sleep(0.05)
        slots = slots_by_instance(server)
    return slots


class PeakSlots:
    """Polls the per-instance gauge in a thread; `.peak` holds the most slots each instance held."""

    def __init__(self, server) -> None:
        self.server = server
        self.peak: dict[str, float] = {}
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._done.is_set():
            for name, value in slots_by_instance(self.server).items():
                self.peak[name] = max(self.peak.get(name, 0.0), value)
            time.sleep(0.02)

    def __enter__(self) -> PeakSlots:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._done.set()
        self._thread.join()


def solo_prefix(url: str, text: str, seed: int, chunks: int) -> list[np.ndarray]:
    """The first `chunks` chunks of the stream alone (the stream is then cancelled)."""
    stream = VoxCPMClient(url).stream(text, max_seconds=LONG_SECONDS, seed=seed)
    prefix = [next(stream) for _ in range(chunks)]
    stream.close()
    return prefix


def assert_same_audio(actual: list[np.ndarray], expected: list[np.ndarray], what: str) -> None:
    assert len(actual) == len(expected), what
    np.testing.assert_allclose(np.concatenate(actual), np.concatenate(expected), rtol=0, atol=1e-5, err_msg=what)


def test_two_instances_load_and_start_idle(two_decoders):
    assert slots_by_instance(two_decoders) == {"ar_decoder_0_0": 0.0, "ar_decoder_0_1": 0.0}


def test_concurrent_streams_spread_over_both_instances_and_equal_their_solo_output(two_decoders, solo_outputs):
    """Which instance takes a request is Triton's choice, made as the text_encoder hands requests on:
    on a loaded machine one burst can land wholly in one instance (once in ~5 clean-clone runs on 2
    cores). So bursts repeat, each checked, until both instances have served; five in a row on one
    instance would mean Triton is not spreading them."""
    url = two_decoders.grpc_url
    served: dict[str, float] = {}
    for _ in range(MAX_BURSTS):
        with PeakSlots(two_decoders) as peak, ThreadPoolExecutor(len(REQUESTS)) as pool:
            together = list(pool.map(lambda request: _run(url, *request), REQUESTS))
        for (text, _, _), alone, batched in zip(REQUESTS, solo_outputs, together):
            assert_same_audio(batched, alone, text)
        assert sum(peak.peak.values()) <= len(REQUESTS)
        assert wait_slots(two_decoders, dict.fromkeys(peak.peak, 0.0)) == dict.fromkeys(peak.peak, 0.0)
        for name, value in peak.peak.items():
            served[name] = max(served.get(name, 0.0), value)
        if len(served) == 2 and all(value >= 1 for value in served.values()):
            return
    raise AssertionError(f"most live slots per instance over {MAX_BURSTS} bursts: {served}; both instances should have served streams")


def _admit_one_long_stream_per_instance(url: str, server) -> dict[str, tuple]:
    """Start long streams one at a time until each instance holds one; the instance a stream went
    to is the one whose gauge grew while it started (nothing else starts or ends meanwhile)."""
    held: dict[str, tuple] = {}
    for seed in range(100, 108):
        text = f"Long stream number {seed}."
        before = slots_by_instance(server)
        stream = VoxCPMClient(url).stream(text, max_seconds=LONG_SECONDS, seed=seed)
        chunks = [next(stream)]
        # The gauge is set right after the step that sent the first window: it may trail the chunk.
        deadline = time.monotonic() + 5.0
        after = slots_by_instance(server)
        while sum(after.values()) != sum(before.values()) + 1 and time.monotonic() < deadline:
            time.sleep(0.02)
            after = slots_by_instance(server)
        grew = [name for name in after if after[name] == before.get(name, 0.0) + 1]
        assert len(grew) == 1 and sum(after.values()) == sum(before.values()) + 1, (before, after)
        if grew[0] in held:
            stream.close()  # a second one on that instance: not needed
            assert wait_slots(server, before) == before
            continue
        held[grew[0]] = (stream, chunks, text, seed)
        if len(held) == 2:
            return held
    raise AssertionError(f"eight streams in a row all went to {list(held)}; Triton should use both instances")


def test_cancelling_a_stream_in_one_instance_leaves_the_other_instance_streaming(two_decoders, solo_outputs):
    url = two_decoders.grpc_url
    held = _admit_one_long_stream_per_instance(url, two_decoders)
    (name_a, (stream_a, chunks_a, text_a, seed_a)), (name_b, (stream_b, chunks_b, text_b, seed_b)) = held.items()
    shorts = REQUESTS[:4]
    with ThreadPoolExecutor(len(shorts)) as pool:
        finished = pool.map(lambda request: _run(url, *request), shorts)
        chunks_a += [next(stream_a) for _ in range(3)]
        chunks_b.append(next(stream_b))
        closed = time.monotonic()
        stream_a.close()  # the client's cancel path: CANCEL_ID to ar_decoder (either instance)
        assert time.monotonic() - closed < 2.0
        # Stream b keeps streaming in its instance while the short streams run in both.
        chunks_b += [next(stream_b) for _ in range(4)]
        for (text, _, _), alone, result in zip(shorts, solo_outputs, list(finished)):
            assert_same_audio(result, alone, text)
    assert wait_slots(two_decoders, {name_a: 0.0, name_b: 1.0}) == {name_a: 0.0, name_b: 1.0}
    chunks_b += [next(stream_b) for _ in range(2)]
    stream_b.close()
    assert wait_slots(two_decoders, {name_a: 0.0, name_b: 0.0}) == {name_a: 0.0, name_b: 0.0}
    assert_same_audio(chunks_a, solo_prefix(url, text_a, seed_a, len(chunks_a)), text_a)
    assert_same_audio(chunks_b, solo_prefix(url, text_b, seed_b, len(chunks_b)), text_b)
    assert wait_slots(two_decoders, {name_a: 0.0, name_b: 0.0}) == {name_a: 0.0, name_b: 0.0}
