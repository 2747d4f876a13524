"""Times the decode_attention op for each split count at VoxCPM2's base-LM shapes (16 q / 2 kv heads
of 128, bf16), per batch size and kernel, to check the default split heuristic (ops/decode_attention.py
`default_num_splits`) and the tensor-core kernel against the CUDA-core one. Each stream attends to
--length cached keys; with --ragged the lengths spread evenly over 1..--length, shuffled, as in a
serving mix (the split count then also decides how long the longest streams' blocks run). Calls
cycle through --layers cache layers as the model's 28 do, so a call does not find the previous
call's keys in L2 (at 64 streams one layer's live K/V is 20 MB). Timing: perf/bench_ops.py's
(median of CUDA-graph replays holding 20 calls); GB/s counts the live K/V bytes.

Usage: python perf/sweep_decode_attention.py --out DIR/sweep_decode_attention.json
       [--batches 1,4,16,32,64,128,256] [--splits 1,2,3,4,6,8,12,16,32] [--length 300]
       [--layers 28] [--kernels mma,mma4,mma8,cuda_core] [--ragged]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perf.bench_ops import graph_time_us  # noqa: E402
from perf.cuda_required import cuda_missing  # noqa: E402
from voxcpm_triton import ops  # noqa: E402
from voxcpm_triton.ops.decode_attention import default_num_splits  # noqa: E402

Q_HEADS, KV_HEADS, HEAD_DIM = 16, 2, 128
# The environment each kernel runs under (the library reads both switches on every call): "mma" lets
# the grid choose the tensor-core kernel's block size, "mma4" / "mma8" force 4 / 8 warps.
KERNEL_ENV = {"mma": {"VOXCPM_DECODE_ATTENTION_MMA": "1"},
              "mma4": {"VOXCPM_DECODE_ATTENTION_MMA": "1", "VOXCPM_DECODE_ATTENTION_WARPS": "4"},
              "mma8": {"VOXCPM_DECODE_ATTENTION_MMA": "1", "VOXCPM_DECODE_ATTENTION_WARPS": "8"},
              "cuda_core": {"VOXCPM_DECODE_ATTENTION_MMA": "0"}}
SWITCHES = ("VOXCPM_DECODE_ATTENTION_MMA", "VOXCPM_DECODE_ATTENTION_WARPS")


def sweep_batch(batch: int, length: int, layers: int, splits: list[int], kernels: list[str],
                ragged: bool) -> list[dict]:
    slots = batch + 1
    k_cache = torch.randn(layers, slots, KV_HEADS, length + 64, HEAD_DIM, device="cuda").to(torch.bfloat16)
    v_cache = torch.randn_like(k_cache)
    q = torch.randn(batch, Q_HEADS, HEAD_DIM, device="cuda").to(torch.bfloat16)
    slot_ids = torch.arange(batch, dtype=torch.int32, device="cuda")
    if ragged:
        spread = torch.linspace(1, length, batch).round().int()
        lengths = spread[torch.randperm(batch, generator=torch.Generator().manual_seed(batch))].cuda()
    else:
        lengths = torch.full((batch,), length, dtype=torch.int32, device="cuda")
    default = default_num_splits(batch, Q_HEADS, KV_HEADS, -1)
    kv_bytes = 2 * int(lengths.sum()) * KV_HEADS * HEAD_DIM * 2
    rows = []
    for kernel in kernels:
        for name in SWITCHES:
            os.environ.pop(name, None)
        os.environ.update(KERNEL_ENV[kernel])
        for count in sorted(set(splits) | {default}):
            turn = itertools.count()

            def call(count=count, turn=turn):
                layer = next(turn) % layers
                return ops.decode_attention(q, k_cache[layer], v_cache[layer], slot_ids, lengths, num_splits=count)

            us = graph_time_us(call)
            rows.append({"kernel": kernel, "batch": batch, "splits": count, "default": count == default, "us": us,
                         "gbps": kv_bytes / (us * 1e3)})
            print(f"{kernel:<9} B={batch:<4} splits={count:<3}{'*' if count == default else ' '} {us:8.1f} us "
                  f"{kv_bytes / (us * 1e3):7.0f} GB/s", flush=True)
        best = min((r for r in rows if r["kernel"] == kernel), key=lambda r: r["us"])
        chosen = next(r for r in rows if r["kernel"] == kernel and r["default"])
        print(f"{kernel:<9} B={batch:<4} best {best['splits']} splits {best['us']:.1f} us; default {default} "
              f"{chosen['us']:.1f} us", flush=True)
    for name in SWITCHES:
        os.environ.pop(name, None)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--batches", default="1,4,16,32,64,128,256")
    parser.add_argument("--splits", default="1,2,3,4,6,8,12,16,32")
    parser.add_argument("--length", type=int, default=300)
    parser.add_argument("--layers", type=int, default=28)
    parser.add_argument("--kernels", default="mma,cuda_core")
    parser.add_argument("--ragged", action="store_true")
    args = parser.parse_args()
    if cuda_missing("sweep_decode_attention"):
        return 2
    if ops.library.library() is None:
        print("sweep_decode_attention: needs the kernels library (build/build_kernels.sh)", file=sys.stderr)
        return 2
    kernels = args.kernels.split(",")
    unknown = set(kernels) - set(KERNEL_ENV)
    if unknown:
        parser.error(f"--kernels takes {sorted(KERNEL_ENV)}, got {sorted(unknown)}")
    splits = [int(s) for s in args.splits.split(",")]
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        rows += sweep_batch(batch, args.length, args.layers, splits, kernels, args.ragged)
        torch.cuda.empty_cache()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "length": args.length,
                                    "ragged": args.ragged, "layers": args.layers, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
