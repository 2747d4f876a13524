# Run 108, call 2: call 1's A/B on an H200 only (issue 5's targets are the H200's): it stops at once
# on any other card, so that a call given an H100 costs its start alone. Two repeats when less
# than 230 s are left.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_prev.so.xz", "build/out/session/commit"]
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing run"; exit 0; }
LIMIT=${LIMIT:-260}
AB_REPEATS=${AB_REPEATS:-$([ "$LIMIT" -gt 230 ] && echo 3 || echo 2)} LIMIT=$LIMIT \
  bash perf/results/gpu-2026-12-06-run108/call1.sh
