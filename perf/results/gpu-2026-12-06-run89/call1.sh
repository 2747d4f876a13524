# Run 89, call 1: the fused flow-matching loop's time tokens and step sizes built once per
# (timesteps, batch) instead of inside every step's graph (~30 kernels a step, four of them the time
# MLPs' GEMMs). The GPU tests of the graphed step, then main against this tree ("ec") at 1 and 64
# streams, interleaved. On an H200 main's 64-stream median is also issue 5's figure after run 86.
# First, on the CPU machine: the kernels library (unchanged by this branch) as lib.so.xz, main's tree
#   rm -rf build/out/session/trees/main && mkdir -p build/out/session/trees/main &&
#   git archive main | tar -x -C build/out/session/trees/main
# and git rev-parse HEAD > build/out/session/commit.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/session/trees/main"]
# LIMIT (seconds, default 540) bounds the whole call.
set -u; LIMIT=${LIMIT:-540}
source perf/device_call_env.sh
R=$OUT/r89; mkdir -p $R; M=$PWD/build/out/session/trees/main; export VOXCPM_LT_CACHE=/tmp/r89_lt.json
timeout 150 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_graph_runner.py tests/gpu/test_engine_gpu.py \
  > $R/tests.log 2>&1; at tests $?
tail -1 $R/tests.log; grep -m5 "^FAILED\|Error" $R/tests.log
l=$(left $LIMIT); [ $l -gt 120 ] && timeout $l $P perf/ab_step.py --out $R/ab \
  --variant main@$M=VOXCPM_KERNELS_LIB=$VOXCPM_KERNELS_LIB --variant ec --batches 1,64 \
  --repeats $([ $l -gt 300 ] && echo 3 || echo 2) > $R/ab.log 2>&1; at ab $?
tail -4 $R/ab/ab_step.md 2>/dev/null || tail -20 $R/ab.log
