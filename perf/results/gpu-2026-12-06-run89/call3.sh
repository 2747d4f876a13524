# Run 89, call 3: call 2's A/B stands (ss -1.9% at 1 stream, -0.7% at 64 on an H100); its tests
# failed in two places, both fixed on wip/step-state since:
# - step_scatter_ref zeroed the scratch position by item assignment, a host-scalar copy that a CUDA
#   graph cannot capture, so the runner's path without the kernels failed to capture;
# - the scatter test drew positions unseeded twice, so slots it does not write differed.
# This call runs the GPU tests of what the branch touches, each step_state kernel against its
# reference, then the rest of the GPU tier while time is left.
# First, on the CPU machine (working tree: branch wip/step-state):
#   VOXCPM_CUDA_ARCHS=90 bash build/build_kernels.sh DIR for this tree, xz into lib_ss.so.xz;
#   git rev-parse HEAD > build/out/session/commit.
# carry: ["build/out/session/lib_ss.so.xz", "build/out/session/commit"]
# LIMIT (seconds, default 540) bounds the whole call.
set -u; LIMIT=${LIMIT:-540}
cp build/out/session/lib_ss.so.xz build/out/session/lib.so.xz
source perf/device_call_env.sh  # unpacks lib.so.xz (this branch's kernels) into build/out/lib
R=$OUT/r89c3; mkdir -p $R; export VOXCPM_LT_CACHE=/tmp/r89_lt.json
TOUCHED="tests/gpu/test_step_state_gpu.py tests/gpu/test_graph_runner.py tests/gpu/test_engine_gpu.py
  tests/gpu/test_fp8_gpu.py tests/gpu/test_folded_decode_gpu.py tests/gpu/test_graph_capture_gc.py"
timeout 300 $P -m pytest -q -p no:cacheprovider -m gpu -rf $TOUCHED > $R/tests.log 2>&1; at tests $?
tail -1 $R/tests.log; grep -m8 "^FAILED\|Error" $R/tests.log
l=$(left $LIMIT); [ $l -gt 30 ] && timeout $l $P perf/bench_ops.py --out $R/bench_step_state.json --quick --no-compile \
  --ops step_gather,step_scatter > $R/bench.log 2>&1; at bench $?
tail -6 $R/bench.log
l=$(left $LIMIT); [ $l -gt 60 ] && timeout $l $P -m pytest -q -p no:cacheprovider -m gpu -rf tests/gpu \
  $(for f in $TOUCHED; do echo --ignore $f; done) --ignore tests/gpu/test_second_device_gpu.py > $R/tier.log 2>&1; at tier $?
tail -1 $R/tier.log; grep -m8 "^FAILED" $R/tier.log
