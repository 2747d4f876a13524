"""Make every system generate exactly the requested number of patches from one checkpoint.

Random weights stop at random steps, and Nano-vLLM-VoxCPM has no min_len, so the only length control
common to all four systems is their max length. Zeroing `stop_head.weight` makes both stop logits 0;
every implementation decides with argmax (ties go to index 0, "continue"), so each stream runs to its
max length. The head still runs, so a step costs what it costs with real weights.

The tensor is zeroed in place inside model.safetensors (its byte range is in the file's header), so a
4.6 GB full-size checkpoint is patched in milliseconds without loading it.

    python -m perf.force_length CHECKPOINT_DIR
"""

from __future__ import annotations

import argparse
import json
import struct
from pathlib import Path
from typing import Optional, Sequence

STOP_HEAD = "stop_head.weight"


def tensor_byte_range(path: Path, name: str) -> tuple[int, int]:
    """Absolute [start, end) of one tensor's data in a .safetensors file."""
    with open(path, "rb") as handle:
        (header_len,) = struct.unpack("<Q", handle.read(8))
        header = json.loads(handle.read(header_len))
    if name not in header:
        raise KeyError(f"{path} has no tensor {name!r}")
    start, end = header[name]["data_offsets"]
    return 8 + header_len + start, 8 + header_len + end


def zero_tensor(path: Path, name: str = STOP_HEAD) -> int:
    """Overwrite the tensor's bytes with zeros (0.0 in every float format); returns bytes written."""
    start, end = tensor_byte_range(path, name)
    with open(path, "r+b") as handle:
        handle.seek(start)
        handle.write(bytes(end - start))
    return end - start


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", type=Path, help="folder holding model.safetensors")
    args = parser.parse_args(argv)
    written = zero_tensor(args.checkpoint / "model.safetensors")
    print(f"zeroed {STOP_HEAD} ({written} bytes) in {args.checkpoint / 'model.safetensors'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
