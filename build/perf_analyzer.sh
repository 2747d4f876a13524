#!/usr/bin/env bash
# Usage: build/perf_analyzer.sh [perf_analyzer options...]
#
# Runs the perf_analyzer that the tritonclient 2.51.0 wheel installed in build/out/venv, with the two
# libraries it links (libb64, libcudart; bundled by nvidia-pytriton) on the library path; build/setup.sh
# gives them their sonames in build/out/lib. Every option is passed through unchanged, e.g.
#   build/perf_analyzer.sh -m voxcpm -u 127.0.0.1:8001 -i grpc --streaming --input-data inputs.json
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/build/out"
if [ ! -x "$OUT/venv/bin/perf_analyzer" ] || [ ! -e "$OUT/lib/libb64.so.0d" ]; then
    echo "perf_analyzer.sh: run build/setup.sh first" >&2
    exit 1
fi
export LD_LIBRARY_PATH="$OUT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
exec "$OUT/venv/bin/perf_analyzer" "$@"
