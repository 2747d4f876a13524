# Run 116, call 1: rows_probe.py on main's library, whatever card comes.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
timeout 150 $P perf/results/gpu-2026-12-07-run116/rows_probe.py 2>&1 | tee $OUT/probe.txt
