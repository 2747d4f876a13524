# Run 85: main after run 81 (short_attention computing the folded norm's statistic up to 2048 rows,
# C ABI 8): GPU tests of what that change reaches (edge inputs, the folded norms, the graph runner,
# the engine), then the step at 1 and 64 streams with the one-stream first patch and a profile at
# 64 streams. Sized for the ~440 s of device time left in the session.
# First, on the CPU machine: VOXCPM_CUDA_ARCHS=90 bash build/build_kernels.sh /tmp/lib_main,
# xz -c /tmp/lib_main/libvoxcpm_kernels.so > build/out/session/lib.so.xz, git rev-parse HEAD > build/out/session/commit.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
R=$OUT/r85; mkdir -p $R
export VOXCPM_LT_CACHE=/tmp/r85_lt.json
timeout 120 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_ops_edge_inputs_gpu.py \
  tests/gpu/test_folded_norms_gpu.py tests/gpu/test_graph_runner.py tests/gpu/test_engine_gpu.py > $R/tests.log 2>&1; rc=$?; at tests $rc
tail -1 $R/tests.log; grep -m8 "^FAILED\|^ERROR" $R/tests.log
[ $rc = 124 ] && exit 1
l=$(left 230); [ $l -gt 60 ] && timeout $l $P perf/profile_step.py --out $R/step --batches 1,64 --modes graph_ops \
  --profile-batches 64 --budget-s $((l - 15)) > $R/step.log 2>&1; at step $?
cat $R/step/profile_step.md 2>/dev/null || tail -20 $R/step.log
