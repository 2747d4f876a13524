# Run 97, call 1: the GPU tier on main's d7f9795 (rope_rotation.cuh / block_row_scale, not yet run
# on a GPU), then run 96's change rebased onto it (branch wip/rope-decode-rt2): the decode rope
# fold's position and new k / v rows load with q (one round trip), the table rows as float4. Run 95
# measured -0.9% at one stream for the fold against run 94's 3.6% bound; this is meant to take more.
# First, on the CPU machine: VOXCPM_CUDA_ARCHS=90 bash build/build_kernels.sh DIR for main (xz into
# build/out/session/lib.so.xz) and for the branch (lib_rt.so.xz); git rev-parse HEAD > build/out/session/commit.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_rt.so.xz", "build/out/session/commit"]
# LIMIT (seconds, default 560) bounds the whole call.
set -u; LIMIT=${LIMIT:-560}
source perf/device_call_env.sh
MAIN_LIB=$PWD/build/out/lib/main/libvoxcpm_kernels.so; RT_LIB=$PWD/build/out/lib/rt/libvoxcpm_kernels.so
unpack_lib build/out/session/lib.so.xz $MAIN_LIB
unpack_lib build/out/session/lib_rt.so.xz $RT_LIB
export VOXCPM_LT_CACHE=/tmp/r97_lt.json
VOXCPM_KERNELS_LIB=$MAIN_LIB timeout 220 $P -m pytest -q -p no:cacheprovider -m gpu -rf tests/gpu \
  --ignore=tests/gpu/test_triton_gpu.py > $OUT/tests_main.log 2>&1; at tests_main $?
tail -1 $OUT/tests_main.log; grep -m8 "^FAILED\|Error" $OUT/tests_main.log
VOXCPM_KERNELS_LIB=$RT_LIB timeout 100 $P -m pytest -q -p no:cacheprovider -m gpu -rf \
  tests/gpu/test_rope_decode_attention_gpu.py tests/gpu/test_decode_attention_gpu.py > $OUT/tests_rt.log 2>&1; at tests_rt $?
tail -1 $OUT/tests_rt.log; grep -m8 "^FAILED\|Error" $OUT/tests_rt.log
grep -q " passed" $OUT/tests_rt.log && ! grep -q "^FAILED" $OUT/tests_rt.log || exit 0
l=$(left $LIMIT); [ $l -gt 100 ] && timeout $l $P perf/ab_step.py --out $OUT/ab \
  --variant main=VOXCPM_KERNELS_LIB=$MAIN_LIB --variant rt=VOXCPM_KERNELS_LIB=$RT_LIB \
  --batches 1,64 --repeats 3 > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
rm -rf $OUT/ab/main_* $OUT/ab/rt_* $OUT/ab/throwaway
