"""Streaming load harness against the `voxcpm` ensemble of a running tritonserver (gRPC streaming).

Each level runs c clients, each with its own gRPC connection and stream; every client sends its
request (TEXT, MAX_SECONDS, SEED, CFG_VALUE, TIMESTEPS) and, with more than one round, its next one
as soon as the previous one ended. A request's first audio is the first response whose AUDIO is not
empty; it ends at the response carrying Triton's final flag (asked for with empty final responses,
because a decoupled ensemble may send the flag on its own).

The server has no minimum-length input, so the generated length is fixed by MAX_SECONDS = patches x
--patch-seconds together with a checkpoint whose stop head never fires (perf/force_length.py); the
audio seconds each request actually got are measured and reported either way.

    python -m perf.stream_load --url 127.0.0.1:8001 --out ours_triton.json
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Optional, Sequence

import numpy as np

from perf.bench_texts import text_for
from perf.stream_metrics import StreamRecord
from perf.sweep import add_sweep_options, run_sweep, sweep_settings
from perf.triton_metrics import LevelMetrics

MODEL = "voxcpm"
FINAL = "triton_final_response"


def request_inputs(grpcclient, text: str, max_seconds: float, seed: int, cfg_value: float, timesteps: int):
    def tensor(name: str, datatype: str, value: np.ndarray):
        t = grpcclient.InferInput(name, list(value.shape), datatype)
        t.set_data_from_numpy(value)
        return t

    return [
        tensor("TEXT", "BYTES", np.array([text.encode("utf-8")], dtype=np.object_)),
        tensor("MAX_SECONDS", "FP32", np.array([max_seconds], dtype=np.float32)),
        tensor("SEED", "INT64", np.array([seed], dtype=np.int64)),
        tensor("CFG_VALUE", "FP32", np.array([cfg_value], dtype=np.float32)),
        tensor("TIMESTEPS", "INT32", np.array([timesteps], dtype=np.int32)),
    ]


class LoadRunner:
    """c clients, each with its own gRPC stream (one connection, one request in flight at a time), so
    every response and every error belongs to a known request."""

    def __init__(self, url: str, patches: int, patch_seconds: float, seed: int, request_timeout_s: float,
                 cfg_value: float = 2.0, timesteps: int = 10):
        import tritonclient.grpc as grpcclient

        from client.streaming import connect

        self.grpcclient = grpcclient
        self.connect = connect  # loopback never through an HTTP proxy, as the client library's
        self.url = url
        self.max_seconds = patches * patch_seconds
        self.seed = seed
        self.request_timeout_s = request_timeout_s
        self.cfg_value = cfg_value
        self.timesteps = timesteps
        self.sample_rate: Optional[int] = None

    def run_level(self, concurrency: int, rounds: int, first_index: int) -> list[StreamRecord]:
        records: list[StreamRecord] = []
        counter = iter(range(first_index, first_index + concurrency * rounds))
        lock = threading.Lock()
        clients_left = [concurrency]
        all_done = threading.Event()
        clients = []

        class Client:
            def __init__(client) -> None:
                client.rounds_left = rounds
                client.record: Optional[StreamRecord] = None
                client.triton = self.connect(self.url)
                client.triton.start_stream(callback=client.on_response)

            def send(client) -> None:  # called with lock held
                client.rounds_left -= 1
                index = next(counter)
                client.record = StreamRecord(f"load-{index}", sent_at=time.perf_counter())
                records.append(client.record)
                inputs = request_inputs(self.grpcclient, text_for(index), self.max_seconds, self.seed + index,
                                        self.cfg_value, self.timesteps)
                try:
                    client.triton.async_stream_infer(MODEL, inputs, request_id=client.record.request_id,
                                                     enable_empty_final_response=True)
                except Exception as exc:  # the client's stream is gone: this and its later rounds fail
                    client.end(time.perf_counter(), f"not sent: {exc}", unsent_cause=str(exc))

            def give_up(client, error: str) -> None:  # called with lock held
                """Count the request in flight and the rounds not sent yet as failed, and drop any
                later response (a late final one must not turn the failure into a success)."""
                if client.record is not None:
                    client.record.error = error
                    client.record = None
                while client.rounds_left > 0:
                    client.rounds_left -= 1
                    records.append(StreamRecord(f"load-{next(counter)}", sent_at=time.perf_counter(),
                                                error=f"not sent: {error}"))

            def end(client, now: float, error: Optional[str], unsent_cause: Optional[str] = None) -> None:
                # called with lock held; unsent_cause: why the request could not be sent at all
                client.record.finished_at = now
                client.record.error = error
                client.record = None
                if client.rounds_left > 0:
                    if unsent_cause is not None:
                        client.give_up(unsent_cause)
                    else:
                        client.send()
                        return
                clients_left[0] -= 1
                if clients_left[0] == 0:
                    all_done.set()

            def on_response(client, result, error) -> None:
                now = time.perf_counter()
                with lock:
                    if client.record is None:
                        return
                    if error is not None:
                        client.end(now, str(error))
                        return
                    audio = result.as_numpy("AUDIO")
                    if audio is not None:
                        client.record.add_chunk(int(audio.size), now)
                        rate = result.as_numpy("SAMPLE_RATE")
                        if rate is not None and rate.size and self.sample_rate is None:
                            self.sample_rate = int(rate.reshape(-1)[0])
                    final = result.get_response().parameters.get(FINAL)
                    if final is not None and final.bool_param:
                        client.end(now, None)

        timed_out = True  # until the level ends in time
        try:
            clients.extend(Client() for _ in range(concurrency))
            with lock:
                for client in clients:
                    client.send()
            timed_out = not all_done.wait(self.request_timeout_s * rounds)
            if timed_out:
                with lock:
                    for client in clients:
                        client.give_up(f"no final response within {self.request_timeout_s * rounds:.0f} s")
        finally:
            for client in clients:
                # Cancelled when the level timed out: waiting for a hung server's answers would hang here.
                client.triton.stop_stream(cancel_requests=timed_out)
                client.triton.close()
        return records


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default="127.0.0.1:8001", help="tritonserver gRPC address")
    parser.add_argument("--patch-seconds", type=float, default=0.16,
                        help="audio seconds per patch of the served model (VoxCPM2/1.5: 0.16, 0.5B: 0.08)")
    parser.add_argument("--request-timeout-s", type=float, default=300.0)
    parser.add_argument("--metrics-url", default=None,
                        help="tritonserver's Prometheus endpoint (http://127.0.0.1:8002/metrics): with --stats-url, "
                             "each level records every model's requests, batches, queue, compute and busy time")
    parser.add_argument("--stats-url", default=None,
                        help="tritonserver's statistics endpoint (http://127.0.0.1:8000/v2/models/stats)")
    add_sweep_options(parser)
    args = parser.parse_args(argv)
    if (args.metrics_url is None) != (args.stats_url is None):
        parser.error("--metrics-url and --stats-url go together")
    runner = LoadRunner(args.url, args.patches, args.patch_seconds, args.seed, args.request_timeout_s)
    # The sample rate comes with the audio: learn it from one request before the sweep.
    runner.run_level(1, 1, 10_000_000)
    if runner.sample_rate is None:
        raise SystemExit(f"no audio from {args.url}: is the {MODEL} model ready?")
    run_level, details = runner.run_level, None
    if args.metrics_url:
        metrics = LevelMetrics(args.metrics_url, args.stats_url, runner.run_level)
        run_level, details = metrics.run_level, metrics.details
    run_sweep(args.system or "ours via tritonserver", run_level, runner.sample_rate, **sweep_settings(args),
              meta={"patches": args.patches, "max_seconds": runner.max_seconds, "url": args.url,
                    "connections": "one gRPC stream per client"}, level_details=details)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
