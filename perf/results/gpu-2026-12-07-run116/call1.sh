# Run 116, call 1: on an H200 first run 110's call2.sh (the A/B for issue 5's figures, shortened),
# then rows_probe.py on main's library, whatever card comes.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_prev.so.xz", "build/out/session/commit"]
set -u
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  mkdir -p $OUT/h200 && OUT=$OUT/h200 AB_REPEATS=2 LIMIT=240 bash perf/results/gpu-2026-12-07-run110/call2.sh
fi
source perf/device_call_env.sh
timeout 150 $P perf/results/gpu-2026-12-07-run116/rows_probe.py 2>&1 | tee $OUT/probe.txt
