"""Counts, in each bf16 instantiation of skinny_gemm, the instructions a warp runs between the
programmatic wait and its activation loads and first HMMA: the stretch on every call's critical path
(perf/RESULTS.md runs 119-120). Static counts from the SASS (one pass of the main loop), for
comparing two builds on the CPU machine, where nothing runs:

    nvcc -O3 -std=c++17 -I kernels -gencode arch=compute_90,code=sm_90 -cubin \\
        kernels/skinny_gemm.cu -o /tmp/skinny.cubin          # or the whole library's .so
    python perf/skinny_sass_stretch.py /tmp/skinny.cubin

Needs cuobjdump on PATH (the CUDA toolkit, or the nvidia-cuda-cuobjdump wheel).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys

INSTANTIATION = re.compile(r"skinny_gemm_kernelI13__nv_bfloat16Li(\d)ELi(\d)ELi(\d)E")
INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4}\*/\s*(.*?)\s*;")


def functions(sass: str) -> dict[tuple[int, int, int], list[str]]:
    """(row tiles, chunks in flight, epilogue) -> the instructions of that instantiation, in order."""
    found = {}
    for part in re.split(r"\n\s*Function : ", sass)[1:]:
        match = INSTANTIATION.search(part.split("\n", 1)[0])
        if match:
            lines = (INSTRUCTION.match(line) for line in part.split("\n"))
            found[tuple(int(g) for g in match.groups())] = [m.group(1) for m in lines if m]
    return found


def stretch(instructions: list[str], loads: int) -> dict[str, int]:
    """Counts after the wait (ACQBULK) of the first pass over the `loads` activation loads. The
    weight's loads are the L1::no_allocate ones (.NA), so the others after the wait are the
    activations'."""
    wait = next(i for i, text in enumerate(instructions) if text.startswith("ACQBULK"))
    after = instructions[wait:]
    activation = [i for i, text in enumerate(after) if "LDG" in text and ".NA" not in text]
    mma = [i for i, text in enumerate(after) if "HMMA" in text]
    return {"before_wait": wait, "first_load": activation[0], "last_load": activation[loads - 1],
            "first_hmma": mma[0], "total": len(instructions)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("binary", help="a cubin or the library .so built for sm_90")
    args = parser.parse_args(argv)
    sass = subprocess.run(["cuobjdump", "-sass", args.binary], capture_output=True, text=True, check=True).stdout
    found = functions(sass)
    if not found:
        print("no bf16 skinny_gemm instantiation in the SASS", file=sys.stderr)
        return 1
    print("| row tiles | chunks in flight | epilogue | before the wait | wait -> activation loads "
          "| wait -> first HMMA | instructions |")
    print("|---|---|---|---|---|---|---|")
    for (tiles, chunks, epilogue), instructions in sorted(found.items()):
        s = stretch(instructions, tiles * chunks)
        print(f"| {tiles} | {chunks} | {epilogue} | {s['before_wait']} | {s['first_load']}..{s['last_load']} "
              f"| {s['first_hmma']} | {s['total']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
