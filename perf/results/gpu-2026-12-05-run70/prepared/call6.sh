# Prepared: decode_attention in 8-warp blocks (decode_attention_wide.patch) alone, in
# build/out/session/trees/w8 (make_tree.sh w8 decode_attention_wide) with lib_w8.so.xz: its GPU
# tests, the sweep at 300 keys, and the interleaved step A/B at 64 streams, 4 warps forced against
# the default choice. (Main's GPU tier, which this call first also ran, ran in run 74.)
# carry: ["build/out/session"]
set -u
source perf/device_call_env.sh
mkdir -p /tmp/r73c6
W=$PWD/build/out/session/trees/w8
WL=$W/build/out/lib/libvoxcpm_kernels.so
unpack_lib build/out/session/lib_w8.so.xz $WL
cd $W
export PYTHONPATH=$W VOXCPM_KERNELS_LIB=$WL
timeout 120 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_decode_attention_gpu.py > /tmp/r73c6/w8_tests.log 2>&1
at "w8 tests" $?; tail -1 /tmp/r73c6/w8_tests.log
timeout 80 $P perf/sweep_decode_attention.py --out /tmp/r73c6/sweep_300.json --batches 32,48,64,96 \
  --splits 1,2 --length 300 --kernels mma4,mma8,mma > /tmp/r73c6/sweep_300.log 2>&1; at "sweep 300" $?
grep " best " /tmp/r73c6/sweep_300.log
l=$(left 585); [ $l -gt 60 ] && timeout $l $P perf/ab_step.py --out /tmp/r73c6/ab \
  --variant warps4=VOXCPM_DECODE_ATTENTION_WARPS=4,VOXCPM_LT_CACHE=/tmp/ab_lt.json \
  --variant auto=VOXCPM_LT_CACHE=/tmp/ab_lt.json --batches 64 --repeats 2 > /tmp/r73c6/ab.log 2>&1; at ab $?
tail -4 /tmp/r73c6/ab/ab_step.md 2>/dev/null
cd /tmp && tar czf $OUT/r73c6.tgz r73c6
