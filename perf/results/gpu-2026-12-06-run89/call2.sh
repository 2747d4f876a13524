# Run 89, call 2 (replaces call 1, which never got a machine): two changes against main, each alone,
# interleaved at 1 and 64 streams after the GPU tests of what they touch.
# - "ec": the fused flow-matching loop's time tokens and step sizes built once per (timesteps, batch)
#   instead of inside every step's graph (~30 kernels a step, four of them the time MLPs' GEMMs);
# - "ss": ec plus the step_state ops, the step's per-slot gathers and scatters (and the stop decision
#   and the host row's assembly) as one launch at each end instead of ~20 small kernels.
# On an H200 main's 64-stream median is also issue 5's figure after run 86.
# First, on the CPU machine (working tree: branch wip/step-state):
#   VOXCPM_CUDA_ARCHS=90 bash build/build_kernels.sh DIR for main (lib.so.xz) and this tree (lib_ss.so.xz);
#   main's and ec's trees: for b in main wip/euler-constants; do d=build/out/session/trees/${b#wip/};
#     rm -rf $d; mkdir -p $d; git archive $b -- . ':!perf/results' | tar -x -C $d; done
#   git rev-parse HEAD > build/out/session/commit.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_ss.so.xz", "build/out/session/commit",
#         "build/out/session/trees/main", "build/out/session/trees/euler-constants"]
# LIMIT (seconds, default 540) bounds the whole call.
set -u; LIMIT=${LIMIT:-540}
cp build/out/session/lib_ss.so.xz build/out/session/this.so.xz
source perf/device_call_env.sh  # unpacks lib.so.xz (main's kernels) into build/out/lib
R=$OUT/r89; mkdir -p $R; export VOXCPM_LT_CACHE=/tmp/r89_lt.json
M=$PWD/build/out/session/trees/main; E=$PWD/build/out/session/trees/euler-constants
MAIN_LIB=$PWD/build/out/lib/main/libvoxcpm_kernels.so
unpack_lib build/out/session/lib.so.xz $MAIN_LIB
unpack_lib build/out/session/this.so.xz build/out/lib/libvoxcpm_kernels.so
# Below LIMIT=400 (a short lease): fewer tests, and ss against main alone.
SHORT=$([ $LIMIT -lt 400 ] && echo 1 || echo 0)
timeout $([ $SHORT = 1 ] && echo 90 || echo 150) $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_step_state_gpu.py \
  tests/gpu/test_graph_runner.py $([ $SHORT = 1 ] || echo tests/gpu/test_engine_gpu.py) > $R/tests.log 2>&1; at tests $?
tail -1 $R/tests.log; grep -m5 "^FAILED\|Error" $R/tests.log
EC="--variant ec@$E=VOXCPM_KERNELS_LIB=$MAIN_LIB"; [ $SHORT = 1 ] && EC=""
l=$(left $LIMIT); [ $l -gt 120 ] && timeout $l $P perf/ab_step.py --out $R/ab \
  --variant main@$M=VOXCPM_KERNELS_LIB=$MAIN_LIB $EC --variant ss \
  --batches 1,64 --repeats $([ $l -gt 400 ] && echo 3 || echo 2) > $R/ab.log 2>&1; at ab $?
tail -5 $R/ab/ab_step.md 2>/dev/null || tail -20 $R/ab.log
# Each step_state kernel against its reference (only if time is left).
l=$(left $LIMIT); [ $l -gt 30 ] && timeout $l $P perf/bench_ops.py --out $R/bench_step_state.json --quick --no-compile \
  --ops step_gather,step_scatter > $R/bench.log 2>&1; at bench $?
tail -6 $R/bench.log
