# Run 107, call 1: short_attention's tensor-core kernel staging by token (token_stage.patch beside
# this script: git am on caf4925, three commits). lib_tok (its first commit): a thread loads the same
# 16-byte piece pair of up to 3 rows of one token (its key row and query heads) with that token's
# table piece, one round trip, where main's thread per row piece waits for each piece's table loads
# in turn (main's SASS: 3 table round trips after the data's); grids of <= 2 blocks a multiprocessor
# get up to 10 warps so that each staging thread has one item (64 streams: 264 items, 9 warps).
# lib_tok2 (all three): the same, with the index setup, the zero rows and the statistic's barrier
# before the programmatic wait (no spills in the 64-stream kernel). Outputs bit-equal to main's by
# construction.
# First the op's GPU tests on tok2 (its staging is tok's), then the kernel alone
# (perf/short_attention_probe.py: 64 streams' shape with the statistic in the kernel and given, one
# stream's, 256 streams'), three libraries interleaved PROBE_REPS (2) times, then the step (ab_step)
# main against the faster of tok / tok2 at AB_BATCHES (1,64) streams, AB_REPEATS (3, or 2 when
# less than 230 s are left) repeats; with a minute left, ncu's full set of the faster one.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_tok.so.xz", "build/out/session/lib_tok2.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-570}
source perf/device_call_env.sh
unpack_variants main tok tok2
export VOXCPM_LT_CACHE=/tmp/r107_lt.json
VOXCPM_KERNELS_LIB=${LIB[tok2]} timeout 100 $P -m pytest -q -p no:cacheprovider -m gpu -rf \
  tests/gpu/test_short_attention_gpu.py tests/gpu/test_folded_norms_gpu.py > $OUT/tests_tok2.log 2>&1; at tests_tok2 $?
tail -1 $OUT/tests_tok2.log; grep -m6 "^FAILED\|Error" $OUT/tests_tok2.log
for rep in $(seq ${PROBE_REPS:-2}); do for v in main tok tok2; do
  VOXCPM_KERNELS_LIB=${LIB[$v]} $P perf/short_attention_probe.py --cases 128:input,128:given,2:input,512:given \
    --time 2>&1 | sed "s/^/$v /"
done; done | tee $OUT/probe.txt
best=$($P perf/short_attention_probe.py --fastest $OUT/probe.txt --among tok,tok2) || exit 0
echo "step A/B: main against $best"
grep -q " passed" $OUT/tests_tok2.log && ! grep -q "^FAILED" $OUT/tests_tok2.log || exit 0
l=$(left $LIMIT); reps=${AB_REPEATS:-$([ $l -gt 230 ] && echo 3 || echo 2)}; echo "repeats $reps"
[ $l -gt 100 ] && timeout $l $P perf/ab_step.py --out $OUT/ab \
  --variant main=VOXCPM_KERNELS_LIB=${LIB[main]} --variant $best=VOXCPM_KERNELS_LIB=${LIB[$best]} \
  --batches ${AB_BATCHES:-1,64} --repeats $reps > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
for f in $OUT/ab/*_*/profile_step.md; do echo $f; cat $f; done > $OUT/per_run.txt 2>/dev/null
rm -rf $OUT/ab/main_* $OUT/ab/${best}_* $OUT/ab/throwaway
# With time left: ncu's full set on the faster library at 64 streams' shape with given scales, as run
# 97's of main (perf/results/h100-2026-12-06-run97/call2/ncu_details.txt).
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
l=$(left $LIMIT); [ $l -gt 60 ] && [ -n "$NCU" ] && VOXCPM_KERNELS_LIB=${LIB[$best]} timeout $l $NCU --clock-control none \
  -k regex:short_attention --launch-skip 2 --launch-count 1 --set full --import-source no -o $OUT/sa128_$best \
  $P perf/short_attention_probe.py --sequences 128 --scales given > $OUT/ncu_run.log 2>&1 && \
  $NCU --import $OUT/sa128_$best.ncu-rep --page details > $OUT/ncu_details.txt 2>&1; at ncu $?
xz -T4 $OUT/sa128_$best.ncu-rep 2>/dev/null
