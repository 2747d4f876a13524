# Run 121, call 1 (prepared, not run): two more cuts of skinny_gemm's instructions after the wait,
# each against main (run 120's lean included), each a patch that applies to main from 593003d on:
#  - gram (skinny_gram.patch): the fused norm's sums of squares on the tensor core, four m16n8k8 a
#    chunk (the diagonal of each tile's Gram matrix) in place of 16 unpacks and 8 FFMA, at one and
#    three 8-row tiles;
#  - epi (skinny_epilogue.patch, three commits): each output's slot (token, column) worked out
#    before the wait instead of twice after the loop; the block's reduction over its 8 warps at
#    its compile-time count (MT values a thread), its 8 x MT shared-memory loads issued together;
#    the accumulators' zeros and the activation offsets pinned before the wait.
# Any card, ~7 minutes: skinny_gemm's GPU tests on each variant (TESTS adds files); run 116's probe
# for main and each, twice (PROBE_ROUNDS); the step A/B at AB_BATCHES (1,4) streams, AB_REPEATS (3)
# runs each. VARIANTS (gram epi) picks fewer. All files also go into all.tar.xz.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_gram.so.xz",
#         "build/out/session/lib_epi.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-420}; VARIANTS=${VARIANTS:-gram epi}
source perf/device_call_env.sh
unpack_variants main $VARIANTS
for v in $VARIANTS; do
  l=$(left $LIMIT); VOXCPM_KERNELS_LIB=${LIB[$v]} timeout $(( l > 90 ? 90 : l )) $P -m pytest -q -p no:cacheprovider \
    -m gpu tests/gpu/test_skinny_gemm_gpu.py ${TESTS:-} > $OUT/tests_$v.log 2>&1; at tests_$v $?
  tail -2 $OUT/tests_$v.log
done
probe_rows ${PROBE_ROUNDS:-2} main $VARIANTS
export VOXCPM_LT_CACHE=/tmp/r121_lt.json
AB_BATCHES=${AB_BATCHES:-1,4} AB_REPEATS=${AB_REPEATS:-3} ab_libraries main $VARIANTS
pack_outputs probe.txt 'tests_*.log' per_run.txt ab.log
