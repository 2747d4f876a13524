# Run 100, call 1: the LocDiT's last layer without its trim below a row threshold (no copies of the
# kept rows; the velocity read out of the whole output by cfg_euler with a row stride). GPU tests of
# the changed op and of the paths through it, then the step A/B: trim = every row count trimmed
# (main's behaviour before), whole = none trimmed; at 1, 16 and 64 streams (22, 352, 1408 rows).
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-560}
source perf/device_call_env.sh
timeout 220 $P -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_ops_parity.py::test_cfg_euler_step \
  tests/gpu/test_ops_parity.py::test_cfg_euler_step_on_velocity_rows_of_the_whole_sequence tests/gpu/test_ops_cuda_graph.py tests/gpu/test_graph_runner.py tests/gpu/test_engine_gpu.py \
  tests/gpu/test_normed_layers_gpu.py tests/gpu/test_folded_norms_gpu.py > $OUT/tests.log 2>&1; at tests $?
tail -3 $OUT/tests.log; grep -E "FAILED|Error" $OUT/tests.log | head -10
export VOXCPM_LT_CACHE=/tmp/r100_lt.json
l=$(left $LIMIT); timeout $l $P perf/ab_step.py --out $OUT/ab --variant trim=VOXCPM_LOCDIT_TRIM_MIN_ROWS=0 \
  --variant whole=VOXCPM_LOCDIT_TRIM_MIN_ROWS=1000000 --batches 1,16,64 --repeats 3 > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
cp $OUT/ab/whole_0/profile_step.md $OUT/whole_profile_step.md 2>/dev/null
rm -rf $OUT/ab/trim_* $OUT/ab/whole_* $OUT/ab/throwaway
