"""Writes voxcpm_triton/ops/lt_cache_seed.json from this repository's H200 measurements (run 69 of
perf/RESULTS.md), run from the repository root:

    python perf/results/h200-2026-12-05-run69/make_seed.py [OUT]

Per shape, the candidates of every source that has it, run 64's search finalists first, then run
68's 3 s walks (call 1, the in-process 64-stream shapes), then its served 0.5 s walks (call 2); the
entry's seconds are the longest walk among them. Run 64 searched 30 s a shape at 1408 rows and 15 s
at 5632. Call A of run 69 seeded the same way (seeded.json: run 64's finalists over call 1's walks)."""
import io
import json
import sys
import tarfile

OUT = sys.argv[1] if len(sys.argv) > 1 else "voxcpm_triton/ops/lt_cache_seed.json"
SECTION = "NVIDIA H200 sm90 cuBLASLt 130100"
MAX_CONFIGS = 12
RUN68 = "perf/results/h200-2026-12-05-run68"
SEARCHED = {"dit down": "1024x4096 bfloat16 add", "dit o_proj": "1024x2048 bfloat16 add",
            "dit qkv": "2560x1024 bfloat16", "dit gate_up": "8192x1024 bfloat16"}
SEARCH_SECONDS = {1408: 30.0, 5632: 15.0}


def run64_entries() -> dict:
    entries = {}
    with tarfile.open("perf/results/h200-2026-12-04-run64/call1/search_json.tgz") as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            for name, result in json.load(io.TextIOWrapper(tar.extractfile(member))).items():
                rows, gemm = name.split(" ", 1)
                if gemm in SEARCHED:
                    entries[f"{rows}x{SEARCHED[gemm]}"] = {
                        "seconds": SEARCH_SECONDS[int(rows)], "configs": [c for _, c in result["top"]]}
    return entries


sources = [run64_entries()] + [json.load(open(f"{RUN68}/{f}"))[SECTION] for f in
                               ("call1/deep.json", "call2/served_lt_cache.json")]
seed = {}
for shape in sorted({shape for source in sources for shape in source}):
    having = [source[shape] for source in sources if shape in source]
    configs = list(dict.fromkeys(tuple(c) for entry in having for c in entry["configs"]))[:MAX_CONFIGS]
    seed[shape] = {"seconds": max(entry["seconds"] for entry in having), "configs": [list(c) for c in configs]}
with open(OUT, "w") as out:
    json.dump({SECTION: seed}, out, indent=1, sort_keys=True)
    out.write("\n")
print(f"{OUT}: {len(seed)} shapes;", {s: e["seconds"] for s, e in seed.items() if e["seconds"] > 3})
