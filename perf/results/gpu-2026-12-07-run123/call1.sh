# Run 123, call 1 (prepared, not run): skinny_gemm's cluster path without cluster barriers after the
# loop (push: skinny_push.patch, four commits: run 121's epi, then the push). Each block st.async-es
# its peers' partial sums into their shared memory and waits on its own mbarrier; one relaxed
# cluster barrier before the programmatic wait makes the mbarriers visible. Worth running if run
# 122's probe shows the push ~1 us a call faster than the two syncs. Any card, ~7 minutes:
# skinny_gemm's and the normed layers' GPU tests on push (their cluster cases included); run 116's
# probe for main, epi and push, twice; the step A/B at AB_BATCHES (1,4) streams, AB_REPEATS (3).
# Libraries: bash build/session_libs.sh epi=perf/results/gpu-2026-12-07-run121/skinny_epilogue.patch \
#   push=perf/results/gpu-2026-12-07-run123/skinny_push.patch
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_epi.so.xz", "build/out/session/lib_push.so.xz",
#         "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-440}
source perf/device_call_env.sh
unpack_variants main epi push
l=$(left $LIMIT); VOXCPM_KERNELS_LIB=${LIB[push]} timeout $(( l > 100 ? 100 : l )) $P -m pytest -q -p no:cacheprovider \
  -m gpu tests/gpu/test_skinny_gemm_gpu.py tests/gpu/test_normed_layers_gpu.py > $OUT/tests_push.log 2>&1; at tests_push $?
tail -2 $OUT/tests_push.log
probe_rows 2 main epi push
export VOXCPM_LT_CACHE=/tmp/r123_lt.json
AB_BATCHES=${AB_BATCHES:-1,4} AB_REPEATS=${AB_REPEATS:-3} ab_libraries main epi push
pack_outputs probe.txt 'tests_*.log' per_run.txt ab.log
