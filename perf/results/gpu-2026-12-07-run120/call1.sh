# Run 120, call 1: skinny_gemm with int activation offsets and unconditional loads of the rows past
# m (lean: skinny_lean.patch on main 6a7fbf7, branch wip/skinny-lean), against main. From the
# wait to the last activation load a warp runs 43-76 instructions instead of 69-174 (cuobjdump).
# On an H200, run 110's call2.sh comes first, shortened (issue 5's first H200 figures since run 94).
# Then, on any card: the GPU tests that cover skinny_gemm, on lean; run 116's probe for main and
# lean, alternating twice; the step A/B at AB_BATCHES (1,4,16) streams. Everything also goes into
# all.tar.xz, since a call brings back at most eight files.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_prev.so.xz",
#         "build/out/session/lib_lean.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-560}; START=$(date +%s)
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  mkdir -p $OUT/h200 && OUT=$OUT/h200 AB_REPEATS=2 LIMIT=250 bash perf/results/gpu-2026-12-07-run110/call2.sh
  LIMIT=$(( LIMIT - ($(date +%s) - START) )); export AB_BATCHES=${AB_BATCHES:-1} AB_REPEATS=${AB_REPEATS:-2}
fi
source perf/device_call_env.sh
unpack_variants main lean
l=$(left $LIMIT); VOXCPM_KERNELS_LIB=${LIB[lean]} timeout $(( l > 150 ? 150 : l )) $P -m pytest -q -p no:cacheprovider \
  -m gpu tests/gpu/test_skinny_gemm_gpu.py tests/gpu/test_normed_layers_gpu.py tests/gpu/test_folded_norms_gpu.py \
  tests/gpu/test_engine_gpu.py > $OUT/tests.log 2>&1; at tests $?
tail -3 $OUT/tests.log
for v in main lean main lean; do
  VOXCPM_KERNELS_LIB=${LIB[$v]} timeout 60 $P perf/results/gpu-2026-12-07-run116/rows_probe.py 2>&1 \
    | sed "s/^/$v /" | tee -a $OUT/probe.txt
done
export VOXCPM_LT_CACHE=/tmp/r120_lt.json
AB_BATCHES=${AB_BATCHES:-1,4,16} ab_libraries main lean
cd $OUT && tar cJf /tmp/all.tar.xz . && mv /tmp/all.tar.xz . && cp ab/ab_step.md . 2>/dev/null
find . -mindepth 1 ! -name all.tar.xz ! -name probe.txt ! -name tests.log ! -name ab_step.md ! -name per_run.txt \
  ! -name ab.log -delete 2>/dev/null; ls -la
