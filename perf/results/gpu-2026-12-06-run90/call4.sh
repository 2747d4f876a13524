# Run 90, call 4: call 1's H200 profile alone (calls 1-3 got an H100 and served the campaign there).
# Runs only on an H200: on any other GPU it stops at once, so such a call costs only its start.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing run"; exit 0; }
source perf/device_call_env.sh
VOXCPM_LT_CACHE=/tmp/r90_lt.json timeout 200 $P perf/profile_step.py --out $OUT/step --batches 1,64,256 \
  --modes graph_ops --profile-batches 64 > $OUT/step.log 2>&1; at step $?
cat $OUT/step/profile_step.md 2>/dev/null || tail -20 $OUT/step.log
