# Run 121, call 1: skinny_gemm's fused-norm sums of squares on the tensor core at one and three
# 8-row tiles (gram: skinny_gram.patch on main 593003d, branch wip/skinny-gram), against main
# (run 120's lean included). Any card, ~4 minutes: the GPU tests of skinny_gemm and the normed
# layers on gram; run 116's probe for main and gram, alternating twice; the step A/B at
# AB_BATCHES (1) streams, AB_REPEATS (2) runs each. TESTS and PROBES shorten it. All files also go
# into all.tar.xz.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_gram.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-240}
source perf/device_call_env.sh
unpack_variants main gram
l=$(left $LIMIT); VOXCPM_KERNELS_LIB=${LIB[gram]} timeout $(( l > 90 ? 90 : l )) $P -m pytest -q -p no:cacheprovider \
  -m gpu ${TESTS:-tests/gpu/test_skinny_gemm_gpu.py tests/gpu/test_normed_layers_gpu.py} > $OUT/tests.log 2>&1; at tests $?
tail -3 $OUT/tests.log
for v in ${PROBES:-main gram main gram}; do
  VOXCPM_KERNELS_LIB=${LIB[$v]} timeout 30 $P perf/results/gpu-2026-12-07-run116/rows_probe.py 2>&1 \
    | sed "s/^/$v /" | tee -a $OUT/probe.txt
done
export VOXCPM_LT_CACHE=/tmp/r121_lt.json
AB_BATCHES=${AB_BATCHES:-1} AB_REPEATS=${AB_REPEATS:-2} ab_libraries main gram
cd $OUT && tar cJf /tmp/all.tar.xz . && mv /tmp/all.tar.xz . && cp ab/ab_step.md . 2>/dev/null
find . -mindepth 1 ! -name all.tar.xz ! -name probe.txt ! -name tests.log ! -name ab_step.md ! -name per_run.txt \
  ! -name ab.log -delete 2>/dev/null; ls
