# Run 97, call 5: main as merged (d7f9795's shared RoPE helpers and the trimmed short_attention,
# library lib_trim = main's kernels). On an H200 first issue 5's step figures at 1 and 64
# streams (ab_step, one variant, three runs); then the whole GPU tier (call 2's stopped at 300 s,
# 96% through, no failure).
# carry: ["build/out/session/lib_trim.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-570}
cp build/out/session/lib_trim.so.xz build/out/session/lib.so.xz
source perf/device_call_env.sh
export VOXCPM_LT_CACHE=/tmp/r97_lt.json
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  timeout 240 $P perf/ab_step.py --out $OUT/h200 --variant main --batches 1,64 --repeats 3 > $OUT/h200.log 2>&1
  at h200 $?; cat $OUT/h200/ab_step.md 2>/dev/null || tail -20 $OUT/h200.log
  cp $OUT/h200/main_0/profile_step.md $OUT/h200_profile_step.md 2>/dev/null; rm -rf $OUT/h200/main_* $OUT/h200/throwaway
fi
l=$(left $LIMIT); timeout $l $P -m pytest -q -p no:cacheprovider -m gpu -rf tests/gpu \
  --ignore=tests/gpu/test_triton_gpu.py --durations=15 > $OUT/tests_main.log 2>&1; at tests_main $?
grep -m3 " passed\|failed" $OUT/tests_main.log | tail -3; grep -m8 "^FAILED\|Error" $OUT/tests_main.log
