# Run 98, call 1: short_attention's table rows prefetched into L1 before its programmatic wait
# (branch wip/short-attention-table-prefetch; lib_pf), against main (lib). Run 97's ncu had a tenth of
# the staging's stall samples on the first use of each row piece's table rows; the tables are
# constants, so they may arrive while the qkv GEMM ends. Outputs unchanged (a prefetch is a hint).
# First the GPU tests: on main's library the two decode attention files and the ops-in-a-graph file (main's 843bd10 / 33d3caa,
# checked on the CPU only so far), on lib_pf the short-attention and folded-norm files; then the
# kernel alone (perf/short_attention_probe.py) interleaved twice; then the step (ab_step) at 1 and 64
# streams, three runs each. On an H200 main's arm is also issue 5's step figures.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_pf.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-570}
source perf/device_call_env.sh
declare -A LIB
for v in main pf; do
  LIB[$v]=$PWD/build/out/lib/$v/libvoxcpm_kernels.so
  unpack_lib build/out/session/$([ $v = main ] && echo lib || echo lib_$v).so.xz ${LIB[$v]}
done
export VOXCPM_LT_CACHE=/tmp/r98_lt.json
VOXCPM_KERNELS_LIB=${LIB[main]} timeout 150 $P -m pytest -q -p no:cacheprovider -m gpu -rf \
  tests/gpu/test_decode_attention_gpu.py tests/gpu/test_rope_decode_attention_gpu.py tests/gpu/test_ops_cuda_graph.py > $OUT/tests_main.log 2>&1; at tests_main $?
tail -1 $OUT/tests_main.log; grep -m6 "^FAILED\|Error" $OUT/tests_main.log
VOXCPM_KERNELS_LIB=${LIB[pf]} timeout 150 $P -m pytest -q -p no:cacheprovider -m gpu -rf \
  tests/gpu/test_short_attention_gpu.py tests/gpu/test_folded_norms_gpu.py > $OUT/tests_pf.log 2>&1; at tests_pf $?
tail -1 $OUT/tests_pf.log; grep -m6 "^FAILED\|Error" $OUT/tests_pf.log
for rep in 1 2; do for v in main pf; do
  VOXCPM_KERNELS_LIB=${LIB[$v]} $P perf/short_attention_probe.py --cases 128:input,128:given,2:input --time \
    2>&1 | sed "s/^/$v /"
done; done | tee $OUT/probe.txt
grep -q " passed" $OUT/tests_pf.log && ! grep -q "^FAILED" $OUT/tests_pf.log || exit 0
l=$(left $LIMIT); [ $l -gt 100 ] && timeout $l $P perf/ab_step.py --out $OUT/ab \
  --variant main=VOXCPM_KERNELS_LIB=${LIB[main]} --variant pf=VOXCPM_KERNELS_LIB=${LIB[pf]} \
  --batches 1,64 --repeats 3 > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
cp $OUT/ab/main_0/profile_step.md $OUT/main_profile_step.md 2>/dev/null
rm -rf $OUT/ab/main_* $OUT/ab/pf_* $OUT/ab/throwaway
