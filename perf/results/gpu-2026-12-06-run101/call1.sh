# Run 101, call 1: l2_probe.py (the LM's 64-row GEMMs with their weight in L2 against cold: the
# ceiling for an L2 prefetch of the next GEMM's weight), then, on an H200 only, run 99's call 1 (main
# against main without row_scale; the tree has whatif_row_scale.patch applied).
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
source perf/device_call_env.sh
timeout 60 $P perf/results/gpu-2026-12-06-run101/l2_probe.py > $OUT/l2_probe.md 2>&1; at probe $?
cat $OUT/l2_probe.md
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: run 99's call 1 not run"; exit 0; }
LIMIT=440 bash perf/results/gpu-2026-12-06-run99/call1.sh
