# Run 109, call 1: the tensor-core decode attention's 2-8 splits merged inside a thread block cluster
# on Hopper (cluster_merge.patch beside this script, git am on 90ae0f7; the library built from it
# with build/build_kernels.sh as RESULTS run 107 says) instead of by the combine kernel after it: one kernel
# boundary less per LM layer at 1-8 streams (36 a step). The library (lib.so.xz) has both merges;
# VOXCPM_DECODE_ATTENTION_CLUSTER=0 selects the combine kernel, whose kernels' SASS is main's
# (cuobjdump on the CPU machine: all 54 of the file's other functions identical).
# First the decode attention GPU tests on it, then the step (ab_step) cluster against combine at
# AB_BATCHES (1,4) streams, AB_REPEATS (3) repeats. On an H200 (issue 5's targets are the H200's;
# run 94's are the last there) also prev (lib_prev.so.xz, built at caf4925, before run 107's
# short_attention) at 64, 1 and 4 streams, two repeats: main's 64-stream step on the H200.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_prev.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-450}
source perf/device_call_env.sh
unpack_variants main prev
export VOXCPM_LT_CACHE=/tmp/r109_lt.json
timeout 150 $P -m pytest -q -p no:cacheprovider -m gpu -rf tests/gpu/test_decode_attention_gpu.py \
  tests/gpu/test_rope_decode_attention_gpu.py tests/gpu/test_folded_decode_gpu.py > $OUT/tests.log 2>&1; at tests $?
tail -1 $OUT/tests.log; grep -m6 "^FAILED\|Error" $OUT/tests.log
grep -q " passed" $OUT/tests.log && ! grep -q "^FAILED" $OUT/tests.log || exit 0
variants=(--variant cluster=VOXCPM_KERNELS_LIB=${LIB[main]}
          --variant combine=VOXCPM_KERNELS_LIB=${LIB[main]},VOXCPM_DECODE_ATTENTION_CLUSTER=0)
batches=${AB_BATCHES:-1,4}; reps=${AB_REPEATS:-3}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  variants+=(--variant prev=VOXCPM_KERNELS_LIB=${LIB[prev]}); batches=${AB_BATCHES:-64,1,4}; reps=${AB_REPEATS:-2}
fi
l=$(left $LIMIT); echo "batches $batches, repeats $reps, $l s left"
timeout $l $P perf/ab_step.py --out $OUT/ab "${variants[@]}" --batches $batches --repeats $reps > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
for f in $OUT/ab/*_*/profile_step.md; do echo $f; cat $f; done > $OUT/per_run.txt 2>/dev/null
grep -h "first patch" $OUT/per_run.txt
rm -rf $OUT/ab/cluster_* $OUT/ab/combine_* $OUT/ab/prev_* $OUT/ab/throwaway
