# Run 90, call 1: issue 5's figures on the H200 with main after run 89 (no H200 has run since run 81).
# On any other GPU it stops at once, so a call that gets an H100 costs only its start.
# First, on the CPU machine: VOXCPM_CUDA_ARCHS=90 bash build/build_kernels.sh DIR for main, xz into
# build/out/session/lib.so.xz; git rev-parse HEAD > build/out/session/commit.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing run"; exit 0; }
source perf/device_call_env.sh
export VOXCPM_LT_CACHE=/tmp/r90_lt.json
timeout 200 $P perf/profile_step.py --out $OUT/step --batches 1,64,256 --modes graph_ops --profile-batches 64 \
  > $OUT/step.log 2>&1; at step $?
cat $OUT/step/profile_step.md 2>/dev/null || tail -20 $OUT/step.log
