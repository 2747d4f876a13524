# Run 95, call 1: rope_kv_write folded into the tensor-core decode attention kernel (branch
# wip/rope-in-decode). Each block rotates (and, from 33 streams on, scales by the folded norm's
# statistic) its query heads in registers as it loads them; the blocks whose split reads this
# token's position write its rotated k and its v to the cache first, then a block barrier. Run 94's
# call 1 bounded the gain: without rope_kv_write's kernel the step was 3.6% shorter at one stream,
# 0.6% at 64. The branch's library (C ABI 11) serves both arms; VOXCPM_DECODE_ROPE=0 gives main's path.
# First the GPU tests of the op and of the decode paths around it, then the A/B at 1 and 64 streams.
# carry: ["build/out/session/lib_rd.so.xz", "build/out/session/commit"]
# LIMIT (seconds, default 420) bounds the whole call.
set -u; LIMIT=${LIMIT:-420}
cp build/out/session/lib_rd.so.xz build/out/session/lib.so.xz
source perf/device_call_env.sh
export VOXCPM_LT_CACHE=/tmp/r95_lt.json
timeout 150 $P -m pytest -q -p no:cacheprovider -m gpu -rf -x tests/gpu/test_rope_decode_attention_gpu.py \
  tests/gpu/test_decode_attention_gpu.py tests/gpu/test_folded_decode_gpu.py tests/gpu/test_graph_runner.py \
  > $OUT/tests.log 2>&1; at tests $?
tail -1 $OUT/tests.log; grep -m12 "^FAILED\|Error\|error:\|max |fused" $OUT/tests.log
grep -q " passed" $OUT/tests.log && ! grep -q "^FAILED" $OUT/tests.log || exit 0
l=$(left $LIMIT); [ $l -gt 90 ] && timeout $l $P perf/ab_step.py --out $OUT/ab --variant fused \
  --variant off=VOXCPM_DECODE_ROPE=0 --batches 1,64 --repeats 3 > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
for f in $OUT/ab/*_*/profile_step.md; do echo "$f $(grep 'graph_ops | 64' $f)"; done
rm -rf $OUT/ab/fused_* $OUT/ab/off_* $OUT/ab/throwaway
