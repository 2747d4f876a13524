# Run 94, call 2: short attention computed inside o_proj's skinny GEMM at <= 32 rows (branch
# wip/attention-o-proj): each warp of the GEMM computes the attention columns it multiplies from the
# qkv rows after its programmatic wait, so no kernel runs between the qkv GEMM and o_proj's. Call 1
# bounded the gain: without short_attention's kernel the one-stream step was 9.9% shorter.
# The branch's library (C ABI 11) serves both arms; VOXCPM_ATTENTION_O_PROJ=0 gives main's path.
# First the GPU tests of the new op and of the ops and layers around it, then the A/B at 1 and 2
# streams (2 streams: only the LocEnc's 10 rows are fused; the LocDiT's 44 are not).
# carry: ["build/out/session/lib_att.so.xz", "build/out/session/commit"]
# LIMIT (seconds, default 420) bounds the whole call.
set -u; LIMIT=${LIMIT:-420}
cp build/out/session/lib_att.so.xz build/out/session/lib.so.xz
source perf/device_call_env.sh
export VOXCPM_LT_CACHE=/tmp/r94_lt.json
timeout 170 $P -m pytest -q -p no:cacheprovider -m gpu -rf -x tests/gpu/test_attention_o_proj_gpu.py \
  tests/gpu/test_short_attention_gpu.py tests/gpu/test_normed_layers_gpu.py tests/gpu/test_skinny_gemm_gpu.py \
  tests/gpu/test_graph_runner.py > $OUT/tests.log 2>&1; at tests $?
tail -1 $OUT/tests.log; grep -m12 "^FAILED\|Error\|error:" $OUT/tests.log
grep -q " passed" $OUT/tests.log && ! grep -q "^FAILED" $OUT/tests.log || exit 0
l=$(left $LIMIT); [ $l -gt 90 ] && timeout $l $P perf/ab_step.py --out $OUT/ab --variant fused \
  --variant off=VOXCPM_ATTENTION_O_PROJ=0 --batches 1,2 --repeats 3 > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
rm -rf $OUT/ab/fused_* $OUT/ab/off_*  # per-run profile files: the table holds their step times
