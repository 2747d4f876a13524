"""Call A's seeded.json: run 68 call 1's lt_cache file (3 s walks at 64 streams) with run 64's 30 s
search finalists added for the three 1408-row cuBLASLt shapes, ahead of the walk's own.

    python seed_cache.py BASE.json RUN64_SEARCH_DIR OUT.json

(RUN64_SEARCH_DIR: perf/results/h200-2026-12-04-run64/call1/search_json.tgz unpacked.) lt_gemm
times every listed configuration at start-up against the heuristic's and F.linear and keeps the
fastest whose output matches, so the seeds are candidates, not choices."""
import json
import sys
from pathlib import Path

base, search_dir, out = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
SHAPES = {"s_64_dit_down.json": ("1408 dit down", "1408x1024x4096 bfloat16 add"),
          "s_64_dit_o_proj.json": ("1408 dit o_proj", "1408x1024x2048 bfloat16 add"),
          "s_64_dit_qkv.json": ("1408 dit qkv", "1408x2560x1024 bfloat16")}
data = json.load(open(base))
(section,) = data
for file, (search_name, shape) in SHAPES.items():
    top = [config for _, config in json.load(open(search_dir / file))[search_name]["top"]]
    walked = data[section][shape]["configs"]
    configs = list(dict.fromkeys(map(tuple, top + walked)))
    data[section][shape] = {"seconds": 30.0, "configs": [list(c) for c in configs]}
    print(shape, len(configs), "candidates; run 64's best", top[0])
json.dump(data, open(out, "w"), indent=1, sort_keys=True)
