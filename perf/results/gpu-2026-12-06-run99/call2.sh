# Run 99, call 2: call 1 again on an H200 (issue 5's targets are the H200's). Its main arm is issue 5's
# step figures on the H200 after runs 95 and 97; the no_rs arm is the bound there. On any other GPU it
# stops at once: call 1 already has the H100's. Same tree as call 1 (whatif_row_scale.patch applied).
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: stopped"; exit 0; }
LIMIT=${LIMIT:-420} bash perf/results/gpu-2026-12-06-run99/call1.sh
