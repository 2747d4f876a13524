# Run 124, call 1: main after run 123's push merged (GPU tests of the engine, the folded norms and
# graph capture, which run 123 did not run on push); run 124's probe of the LMs' GEMMs at 1-4 rows
# with cold weights, on main and on fill1 (skinny_fill1.patch: at one row tile the split plan
# fills every resident block, not one a multiprocessor); the step A/B main against fill1 at
# AB_BATCHES (1,4) streams, AB_REPEATS (3) runs each; TESTS_LIMIT (150) s for the tests. Any card,
# ~7 minutes.
# Libraries: bash build/session_libs.sh fill1=perf/results/gpu-2026-12-07-run124/skinny_fill1.patch
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_fill1.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-480}
source perf/device_call_env.sh
unpack_variants main fill1
timeout ${TESTS_LIMIT:-150} $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_engine_gpu.py tests/gpu/test_folded_norms_gpu.py \
  tests/gpu/test_ops_cuda_graph.py > $OUT/tests_main.log 2>&1; at tests_main $?
tail -2 $OUT/tests_main.log
probe_lm main fill1
export VOXCPM_LT_CACHE=/tmp/r124_lt.json
AB_BATCHES=${AB_BATCHES:-1,4} AB_REPEATS=${AB_REPEATS:-3} ab_libraries main fill1
pack_outputs lm_probe.txt 'tests_*.log' per_run.txt ab.log
