# Run 110, call 2 (prepared in stop 55, not yet run): the next session's first call, whatever card
# comes. On an H200: run 108's A/B at 64 and 1 streams (run 107's short_attention against the
# library before it; issue 5's 64-stream figure on the H200 is still run 94's), then call 1's
# gate_up sweep with the time left. On any other card: call 1's sweep alone (~1 minute).
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_prev.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-330}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  AB_REPEATS=${AB_REPEATS:-3} LIMIT=$(( LIMIT - 70 )) bash perf/results/gpu-2026-12-06-run108/call1.sh
  mkdir -p $OUT/sweep && OUT=$OUT/sweep LIMIT=60 bash perf/results/gpu-2026-12-07-run110/call1.sh
else
  LIMIT=$LIMIT bash perf/results/gpu-2026-12-07-run110/call1.sh
fi
