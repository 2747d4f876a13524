"""Ours in-process: the continuous-batching Engine and the WindowedVocoder driven directly, no server.

One loop does what the Triton repository does across its models: engine.step() advances every live
stream by one patch, each stream's patches are grouped into windows as ar_decoder groups them
(audio.chunks: 1, 2, then --chunk-patches new patches per window), the vocoder decodes all windows
of that step as one batch, and each stream's chunk is timed when its PCM exists. A level of c
clients submits c requests at once; with --rounds > 1 a client submits its next request as soon as
its previous one finished.

The length is forced with min_len = max_len = --patches (and, for parity with the baselines, the
checkpoint's zeroed stop head: perf/force_length.py).

    python -m perf.inprocess_bench --checkpoint DIR --out ours_inprocess.json [--device cuda]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Optional, Sequence

import torch

from perf.bench_texts import text_for
from perf.cuda_required import cuda_missing
from perf.stream_metrics import StreamRecord
from perf.sweep import add_sweep_options, run_sweep, sweep_settings
from voxcpm_triton.audio.chunks import DEFAULT_MAX_NEW, PatchChunker
from voxcpm_triton.audio.vocoder import WindowedVocoder
from voxcpm_triton.checkpoint.loader import load_checkpoint
from voxcpm_triton.engine.engine import Engine
from voxcpm_triton.frontend import Frontend

DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}


class InProcessSystem:
    def __init__(self, checkpoint: str, device: str, dtype: torch.dtype, max_slots: int, max_context: int,
                 chunk_patches: int = DEFAULT_MAX_NEW):
        loaded = load_checkpoint(checkpoint, dtype=dtype, device=device)
        self.frontend = Frontend(loaded)
        # Graphs for every window shape the chunking below makes, as the vocoder model's chunk_patches.
        self.vocoder = WindowedVocoder(loaded.audio_vae, loaded.config.patch_size, max_new_patches=chunk_patches)
        # The server's max_context (4096), or the checkpoint's own limit where that is smaller (tiny).
        self.max_context = min(max_context, loaded.config.max_length)
        # Each step's windows go through the vocoder before the next step is queued: on one CUDA
        # stream a launched-ahead step would hold the vocoder back by a whole step, where the
        # served vocoder runs in its own process next to the decoder.
        self.engine = Engine(loaded.model, max_slots=max_slots, max_context=self.max_context, device=device,
                             window_patches=self.vocoder.window_patches, launch_ahead=False)
        self.sample_rate = int(self.vocoder.sample_rate)
        self.chunk_patches = chunk_patches

    def request(self, index: int, patches: int, seed: int):
        prepared = self.frontend.prepare(text_for(index))
        return dataclasses.replace(prepared, request_id=f"ours-{index}", min_len=patches, max_len=patches,
                                   seed=seed + index)

    def run_level(self, concurrency: int, rounds: int, first_index: int, patches: int,
                  seed: int) -> list[StreamRecord]:
        records: list[StreamRecord] = []
        live: dict[str, tuple[StreamRecord, int]] = {}  # request id -> (record, its client's slot)
        chunkers: dict[str, PatchChunker] = {}
        left = {slot: rounds for slot in range(concurrency)}
        counter = iter(range(first_index, first_index + concurrency * rounds))

        def send(slot: int) -> None:
            left[slot] -= 1
            index = next(counter)
            request = self.request(index, patches, seed)
            record = StreamRecord(request.request_id, sent_at=time.perf_counter())
            records.append(record)
            try:
                self.engine.submit(request)
            except ValueError as exc:
                record.error = str(exc)
                return
            live[request.request_id] = (record, slot)
            chunkers[request.request_id] = PatchChunker(self.vocoder.window_patches, self.chunk_patches)

        for slot in range(concurrency):
            send(slot)
        while live:
            outputs = self.engine.step()
            windows = []  # (request id, window, new patches)
            for output in outputs:
                if output.error is not None or output.request_id not in chunkers:
                    continue
                taken = chunkers[output.request_id].feed(output.window, output.finished)
                if taken is not None:
                    windows.append((output.request_id, *taken))
            chunks = []
            if windows:
                chunks = self.vocoder.decode([w for _, w, _ in windows], [n for _, _, n in windows])
            now = time.perf_counter()
            for (request_id, _, _), chunk in zip(windows, chunks):
                live[request_id][0].add_chunk(int(chunk.size), now)
            for output in outputs:
                if not (output.finished or output.error) or output.request_id not in live:
                    continue
                record, slot = live.pop(output.request_id)
                chunkers.pop(output.request_id, None)
                record.finished_at = now
                record.error = output.error
                if left[slot] > 0:
                    send(slot)
        return records


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bfloat16")
    parser.add_argument("--max-context", type=int, default=4096, help="as model_repository/ar_decoder")
    parser.add_argument("--chunk-patches", type=int, default=DEFAULT_MAX_NEW,
                        help="new patches per vocoder window at most, as ar_decoder's chunk_patches")
    add_sweep_options(parser)
    args = parser.parse_args(argv)
    if torch.device(args.device).type == "cuda" and cuda_missing("inprocess_bench", "--device cpu"):
        return 2
    started = time.perf_counter()
    system = InProcessSystem(args.checkpoint, args.device, DTYPES[args.dtype], max(args.levels), args.max_context,
                             args.chunk_patches)
    load_s = time.perf_counter() - started

    def run_level(concurrency: int, rounds: int, first_index: int) -> list[StreamRecord]:
        return system.run_level(concurrency, rounds, first_index, args.patches, args.seed)

    run_sweep(args.system or "ours in-process", run_level, system.sample_rate, **sweep_settings(args),
              meta={"patches": args.patches, "device": args.device, "dtype": args.dtype, "load_s": load_s,
                    "max_context": system.max_context, "chunk_patches": args.chunk_patches})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
