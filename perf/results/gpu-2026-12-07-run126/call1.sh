# Run 126, call 1 (prepared, not run): deep (skinny_deep.patch: at one row tile, the LMs' decode up
# to 8 streams, each warp keeps eight chunks of weights in flight instead of four: one round of
# loads for qkv and gate_up at one row where main takes two, 226 registers, so one block a
# multiprocessor and none of the next kernel's beside it) against main. Any card, ~6 minutes:
# skinny_gemm's GPU tests on deep; run 124's LM probe on main and deep; the step A/B at AB_BATCHES
# (1,4) streams, AB_REPEATS (3) runs each.
# Libraries: bash build/session_libs.sh deep=perf/results/gpu-2026-12-07-run126/skinny_deep.patch prev=@7a6c953
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_deep.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-400}
source perf/device_call_env.sh
unpack_variants main deep
VOXCPM_KERNELS_LIB=${LIB[deep]} timeout 90 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_skinny_gemm_gpu.py \
  > $OUT/tests_deep.log 2>&1; at tests_deep $?
tail -2 $OUT/tests_deep.log
probe_lm main deep
export VOXCPM_LT_CACHE=/tmp/r126_lt.json
AB_BATCHES=${AB_BATCHES:-1,4} AB_REPEATS=${AB_REPEATS:-3} ab_libraries main deep
pack_outputs lm_probe.txt 'tests_*.log' per_run.txt ab.log
