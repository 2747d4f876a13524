"""Nano-vLLM-VoxCPM (`nano-vllm-voxcpm` 2.0.5 from PyPI) on the same checkpoint, through its own async
server pool (a worker process with continuous batching and CUDA graphs), streaming.

flash-attn cannot be installed on the GPU machine, so perf/baselines/flash_attn_standin (torch SDPA)
is put first on the path of this process and of the worker it spawns; see perf/README.md.
Nano has no min_len: the length is forced by the checkpoint's zeroed stop head (perf/force_length.py)
plus max_generate_length = --patches. max_model_len defaults to 512 (prompt + 50 patches fit many
times over) because the stand-in's decode attention reads block-table-width keys.

    python -m perf.baselines.nanovllm_bench --checkpoint DIR --out nanovllm.json
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from perf.bench_texts import text_for
from perf.stream_metrics import StreamRecord
from perf.sweep import add_sweep_options, run_sweep, sweep_settings

STANDIN = Path(__file__).resolve().parent / "flash_attn_standin"


def use_flash_attn_standin() -> None:
    """Make `import flash_attn` find the stand-in here and in spawned workers (they inherit env)."""
    sys.path.insert(0, str(STANDIN))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(STANDIN), os.environ.get("PYTHONPATH")) if p)


def make_run_level(loop: asyncio.AbstractEventLoop, pool, patches: int, seed: int):
    async def one(index: int, record: StreamRecord) -> None:
        try:
            async for chunk in pool.generate(target_text=text_for(index), max_generate_length=patches,
                                             cfg_value=2.0, seed=seed + index):
                record.add_chunk(int(np.asarray(chunk).size), time.perf_counter())
            record.finished_at = time.perf_counter()
        except Exception as exc:  # reported per level, not fatal to the sweep
            record.error = f"{type(exc).__name__}: {exc}"

    async def client(slot: int, rounds: int, first_index: int, records: list[StreamRecord]) -> None:
        for r in range(rounds):
            index = first_index + slot * rounds + r
            record = StreamRecord(f"nano-{index}", sent_at=time.perf_counter())
            records.append(record)
            await one(index, record)

    def run_level(concurrency: int, rounds: int, first_index: int) -> list[StreamRecord]:
        records: list[StreamRecord] = []

        async def level() -> None:
            await asyncio.gather(*(client(s, rounds, first_index, records) for s in range(concurrency)))

        loop.run_until_complete(level())
        return records

    return run_level


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--max-model-len", type=int, default=512)
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    parser.add_argument("--enforce-eager", action="store_true", help="no CUDA graphs (nano's own switch)")
    add_sweep_options(parser)
    args = parser.parse_args(argv)

    use_flash_attn_standin()
    from nanovllm_voxcpm.models.voxcpm2.server import AsyncVoxCPM2ServerPool

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)

    async def start():
        pool = AsyncVoxCPM2ServerPool(
            model_path=args.checkpoint, inference_timesteps=10, max_num_seqs=max(args.levels),
            max_model_len=args.max_model_len, gpu_memory_utilization=args.gpu_memory_utilization,
            enforce_eager=args.enforce_eager, devices=[0])
        await pool.wait_for_ready()
        return pool, await pool.get_model_info()

    loaded = time.perf_counter()
    pool, info = loop.run_until_complete(start())
    load_s = time.perf_counter() - loaded
    try:
        run_sweep(args.system or "nano-vllm-voxcpm 2.0.5", make_run_level(loop, pool, args.patches, args.seed),
                  int(info["sample_rate"]), **sweep_settings(args),
                  meta={"patches": args.patches, "max_model_len": args.max_model_len, "load_s": load_s,
                        "enforce_eager": args.enforce_eager,
                        "notes": "flash-attn replaced by the SDPA stand-in in perf/baselines"})
    finally:
        loop.run_until_complete(pool.stop())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
