"""perf.stream_load when the server does not answer or a client's stream breaks: every planned
request of the level is counted, a timed-out one stays a failure, and the level ends without waiting
on the server (a fake gRPC client stands in for tritonclient)."""

from __future__ import annotations

import time

from perf.stream_load import LoadRunner


class FakeInput:
    def __init__(self, name, shape, datatype):
        self.name = name

    def set_data_from_numpy(self, value):
        pass


class FakeClient:
    """Never answers; `refuse_after` sends later it raises, as a dead stream's client does."""

    instances: list["FakeClient"] = []
    refuse_after: int | None = None

    def __init__(self, url):
        self.callback = None
        self.sent = 0
        self.stopped_with = None
        FakeClient.instances.append(self)

    def start_stream(self, callback):
        self.callback = callback

    def async_stream_infer(self, model, inputs, request_id, enable_empty_final_response):
        if self.refuse_after is not None and self.sent >= self.refuse_after:
            raise RuntimeError("The stream is no longer in valid state")
        self.sent += 1

    def stop_stream(self, cancel_requests=False):
        self.stopped_with = cancel_requests

    def close(self):
        pass


class FakeGrpc:
    InferenceServerClient = FakeClient
    InferInput = FakeInput


def runner(timeout_s: float) -> LoadRunner:
    load = LoadRunner("127.0.0.1:1", patches=3, patch_seconds=0.16, seed=0, request_timeout_s=timeout_s)
    load.grpcclient, load.connect = FakeGrpc, FakeClient
    return load


def test_a_level_that_times_out_counts_every_request_as_failed_and_cancels():
    FakeClient.instances, FakeClient.refuse_after = [], None
    load = runner(0.05)
    records = load.run_level(concurrency=2, rounds=3, first_index=0)
    assert len(records) == 6 and all(r.error for r in records)
    assert sum(r.error.startswith("no final response") for r in records) == 2  # the two in flight
    assert all(c.stopped_with is True for c in FakeClient.instances)
    # A final response arriving now belongs to nobody: the failure stays a failure.
    client = FakeClient.instances[0]
    client.callback(None, RuntimeError("late"))
    assert all(r.error for r in records)


def test_a_broken_stream_fails_its_clients_remaining_rounds_at_once():
    FakeClient.instances, FakeClient.refuse_after = [], 0
    load = runner(30.0)
    started = time.monotonic()
    records = load.run_level(concurrency=2, rounds=2, first_index=0)
    assert time.monotonic() - started < 5.0  # nothing waited for the 60 s level timeout
    assert len(records) == 4 and all(r.error and r.error.startswith("not sent") for r in records)
