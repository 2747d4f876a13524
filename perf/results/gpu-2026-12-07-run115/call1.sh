# Run 115, call 1: skinny_gemm with its later rounds' weights prefetched into L1 before the
# programmatic wait and the next round's activations requested with this round's (pf, branch
# wip/skinny-prefetch) against main's library (main), on whatever card comes: skinny_gemm's GPU
# tests on pf, then the step A/B at 1, 4 and 16 streams, interleaved.
# Needs the branch: git am perf/results/gpu-2026-12-07-run115/skinny_prefetch.patch on 170fcd2 (wip/skinny-prefetch, deleted).
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_pf.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-540}
source perf/device_call_env.sh
unpack_variants main pf
l=$(left $LIMIT); VOXCPM_KERNELS_LIB=${LIB[pf]} timeout $(( l > 150 ? 150 : l )) $P -m pytest -q -p no:cacheprovider -m gpu \
  -x tests/gpu/test_skinny_gemm_gpu.py > $OUT/tests.log 2>&1; at tests $?
tail -3 $OUT/tests.log
export VOXCPM_LT_CACHE=/tmp/r115_lt.json
l=$(left $LIMIT); timeout $l $P perf/ab_step.py --out $OUT/ab --variant main=VOXCPM_KERNELS_LIB=${LIB[main]} \
  --variant pf=VOXCPM_KERNELS_LIB=${LIB[pf]} --batches ${AB_BATCHES:-1,4,16} --repeats ${AB_REPEATS:-3} \
  > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
for f in $OUT/ab/*_*/profile_step.md; do echo $f; cat $f; done > $OUT/per_run.txt 2>/dev/null
grep -h "graph_ops\|first patch" $OUT/per_run.txt
rm -rf $OUT/ab/main_* $OUT/ab/pf_* $OUT/ab/throwaway
