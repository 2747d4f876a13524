# Prepared, not run: the whole GPU tier on main, then the step at 1 and 64 streams as run 70's call 1
# timed it (5.33 / 13.66 ms on the H200). Since run 70, main changed how the engine uses its device
# without a GPU to run it (voxcpm_triton/engine/device_guard.py: the engine's device current around
# the runner's work, each graph cache capturing on a stream of its own device, the step's event
# recorded on the engine's device) and how its graphs are captured (thread-local mode, as the
# vocoder's were: tests/gpu/test_graph_capture_threads.py), so this goes first;
# tests/gpu/test_second_device_gpu.py skips on one GPU. Needs no patch; main's kernels are unchanged since build/out/session/lib.so.xz was built.
# carry: ["build/out/session"]
set -u
source perf/device_call_env.sh
mkdir -p /tmp/r70c0
timeout 400 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu > /tmp/r70c0/gpu_tier.log 2>&1; at "gpu tier" $?
tail -3 /tmp/r70c0/gpu_tier.log
l=$(left 560); [ $l -gt 60 ] && timeout $l $P perf/profile_step.py --out /tmp/r70c0/step --batches 1,64 --modes graph_ops \
  --profile-batches= > /tmp/r70c0/step.log 2>&1; at step $?
grep -A4 "^| mode" /tmp/r70c0/step.log | tail -n +3
cd /tmp && tar czf $OUT/r70c0.tgz r70c0
