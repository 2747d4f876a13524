"""The reference `voxcpm` package (PyPI 2.0.3) on the same checkpoint: batch 1, streaming.

It cannot batch, so a concurrency level of c means c clients whose requests the one model serves one
after another (FIFO through a lock), which is what a user of a single reference process sees: first
audio grows with the queue and throughput stays at one stream's rate. Its default levels stop at 16
for that reason (each further level only repeats the batch-1 rate over a longer queue).

The length is forced with min_len = max_len = --patches (the reference obeys its stop head only after
min_len), retry_badcase off, no normalisation or denoiser.

    python -m perf.baselines.reference_bench --checkpoint DIR --out reference.json [--device cuda] [--compile]
"""

from __future__ import annotations

import argparse
import threading
import time
from typing import Optional, Sequence

import numpy as np
import torch

from perf.bench_texts import text_for
from perf.stream_metrics import StreamRecord
from perf.sweep import add_sweep_options, run_sweep, sweep_settings

DEFAULT_LEVELS = [1, 4, 16]


def load_reference(checkpoint: str, device: str, compile_model: bool):
    """voxcpm.VoxCPM on a local folder; the stand-ins of tests/reference_shim.py are used only where
    torchaudio / librosa do not import (this CPU machine), never on the GPU machine."""
    from tests.reference_shim import import_reference

    voxcpm = import_reference()
    if voxcpm is None:
        raise SystemExit("the reference package `voxcpm` is not installed")
    return voxcpm.VoxCPM(voxcpm_model_path=checkpoint, zipenhancer_model_path=None, enable_denoiser=False,
                         optimize=compile_model, device=device)


class FifoLock:
    """A lock served in the order it was asked for. threading.Lock is not fair: a client that
    releases it and asks again at once usually gets it back before the waiting threads wake, so its
    next request skipped the queue (run 1's c=4 first audio, perf/RESULTS.md run 72)."""

    def __init__(self) -> None:
        self._turns = threading.Condition()
        self._issued = 0
        self._serving = 0

    def __enter__(self) -> None:
        with self._turns:
            ticket = self._issued
            self._issued += 1
            self._turns.wait_for(lambda: self._serving == ticket)

    def __exit__(self, *exc) -> None:
        with self._turns:
            self._serving += 1
            self._turns.notify_all()


def make_run_level(tts, patches: int, seed: int):
    lock = FifoLock()

    def one_request(index: int, record: StreamRecord) -> None:
        try:
            with lock:
                # PyPI 2.0.3's generate has no seed argument: it draws from torch's global generator.
                torch.manual_seed(seed + index)
                chunks = tts.generate_streaming(text_for(index), cfg_value=2.0, inference_timesteps=10,
                                                min_len=patches, max_len=patches, normalize=False,
                                                denoise=False, retry_badcase=False)
                for chunk in chunks:
                    record.add_chunk(int(np.asarray(chunk).size), time.perf_counter())
                record.finished_at = time.perf_counter()
        except Exception as exc:  # a failed request is reported in the table, not fatal to the sweep
            record.error = f"{type(exc).__name__}: {exc}"

    def run_level(concurrency: int, rounds: int, first_index: int) -> list[StreamRecord]:
        records: list[StreamRecord] = []

        def client(slot: int) -> None:
            for r in range(rounds):
                index = first_index + slot * rounds + r
                record = StreamRecord(f"ref-{index}", sent_at=time.perf_counter())
                records.append(record)
                one_request(index, record)

        threads = [threading.Thread(target=client, args=(slot,)) for slot in range(concurrency)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return records

    return run_level


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--compile", action="store_true", help="the reference's optimize=True (torch.compile)")
    add_sweep_options(parser)
    parser.set_defaults(levels=DEFAULT_LEVELS)
    args = parser.parse_args(argv)
    tts = load_reference(args.checkpoint, args.device, args.compile)
    sample_rate = int(tts.tts_model.sample_rate)
    run_sweep(args.system or "reference voxcpm 2.0.3", make_run_level(tts, args.patches, args.seed), sample_rate,
              **sweep_settings(args),
              meta={"patches": args.patches, "device": args.device, "compile": args.compile,
                    "notes": "batch 1; concurrent requests served one after another"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
