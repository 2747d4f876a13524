"""Times the decode_attention op for each split count at VoxCPM2's base-LM shapes (16 q / 2 kv heads
of 128, bf16), per batch size, to choose the default split heuristic (ops/decode_attention.py
`default_num_splits`). Each stream attends to --length cached keys. Timing: perf/bench_ops.py's
(median of CUDA-graph replays holding 20 calls).

Usage: python perf/sweep_decode_attention.py --out DIR/sweep_decode_attention.json
       [--batches 1,16,64,256] [--splits 1,2,4,8,16,32,64] [--length 300]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perf.bench_ops import graph_time_us  # noqa: E402
from voxcpm_triton import ops  # noqa: E402
from voxcpm_triton.ops.decode_attention import default_num_splits  # noqa: E402

Q_HEADS, KV_HEADS, HEAD_DIM = 16, 2, 128


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--batches", default="1,16,64,256")
    parser.add_argument("--splits", default="1,2,4,8,16,32,64")
    parser.add_argument("--length", type=int, default=300)
    args = parser.parse_args()
    if not torch.cuda.is_available() or ops.library.library() is None:
        print("sweep_decode_attention needs a CUDA GPU and the kernels library", file=sys.stderr)
        return 2
    rows = []
    for batch in (int(b) for b in args.batches.split(",")):
        slots = batch + 1
        k_cache = torch.randn(slots, KV_HEADS, args.length + 64, HEAD_DIM, device="cuda").to(torch.bfloat16)
        v_cache = torch.randn_like(k_cache)
        q = torch.randn(batch, Q_HEADS, HEAD_DIM, device="cuda").to(torch.bfloat16)
        slot_ids = torch.arange(batch, dtype=torch.int32, device="cuda")
        lengths = torch.full((batch,), args.length, dtype=torch.int32, device="cuda")
        default = default_num_splits(batch, Q_HEADS, KV_HEADS, -1)
        for splits in sorted({int(s) for s in args.splits.split(",")} | {default}):
            us = graph_time_us(lambda: ops.decode_attention(q, k_cache, v_cache, slot_ids, lengths, num_splits=splits))
            kv_bytes = 2 * batch * KV_HEADS * args.length * HEAD_DIM * 2
            rows.append({"batch": batch, "splits": splits, "default": splits == default, "us": us,
                         "gbps": kv_bytes / (us * 1e3)})
            print(f"B={batch:<4} splits={splits:<3}{'*' if splits == default else ' '} {us:8.1f} us "
                  f"{kv_bytes / (us * 1e3):7.0f} GB/s", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"device": torch.cuda.get_device_name(), "length": args.length, "rows": rows},
                                   indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
