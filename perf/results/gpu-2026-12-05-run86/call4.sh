# Run 86, call 4 (as run): the patched step at 1 and 64 streams with the one-stream first patch.
# Its first command, the whole GPU tier, stopped at collection (the device image has no tritonclient,
# which test_triton_gpu.py imports); call 5 ran the tier without that file.
# carry: ["build/out/session/lib_fd.so.xz", "build/out/session/commit"]
cp build/out/session/lib_fd.so.xz build/out/session/lib.so.xz; source perf/device_call_env.sh
R=$OUT/r86c4; mkdir -p $R; export VOXCPM_LT_CACHE=/tmp/r86_lt.json
timeout 330 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu > $R/tests.log 2>&1; rc=$?; at tests $rc
tail -1 $R/tests.log; grep -m12 "^FAILED\|^ERROR" $R/tests.log
l=$(left 440); [ $l -gt 60 ] && timeout $l $P perf/profile_step.py --out $R/step --batches 1,64 --modes graph_ops \
  --profile-batches= --budget-s $((l - 15)) > $R/step.log 2>&1; at step $?
cat $R/step/profile_step.md 2>/dev/null | head -30 || tail -20 $R/step.log
