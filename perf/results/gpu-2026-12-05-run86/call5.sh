# Run 86, call 5 (as run): the whole GPU tier on the patched tree, without test_triton_gpu.py (the
# device image has no tritonclient).
# carry: ["build/out/session/lib_fd.so.xz", "build/out/session/commit"]
cp build/out/session/lib_fd.so.xz build/out/session/lib.so.xz; source perf/device_call_env.sh
R=$OUT/r86c5; mkdir -p $R; export VOXCPM_LT_CACHE=/tmp/r86_lt.json
timeout 400 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu --ignore=tests/gpu/test_triton_gpu.py > $R/tests.log 2>&1
rc=$?; at tests $rc; tail -1 $R/tests.log; grep -m12 "^FAILED\|^ERROR" $R/tests.log
