# Run 117, call 1 (prepared, not run): skinny_gemm with four chunks of weights in flight at three
# 8-row tiles, the activations past a warp's first chunk staged in shared memory with cp.async (xs).
# On whatever card comes: skinny_gemm's GPU tests on xs; run 116's rows_probe.py for main and xs,
# alternating twice; then the step A/B at 1 and 4 streams, interleaved.
# Needs the branch: git am perf/results/gpu-2026-12-07-run117/skinny_xstage.patch on main (wip/skinny-xstage,
# deleted), then the library built for sm_90 and xz'd to build/out/session/lib_xs.so.xz.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_xs.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-540}
source perf/device_call_env.sh
unpack_variants main xs
l=$(left $LIMIT); VOXCPM_KERNELS_LIB=${LIB[xs]} timeout $(( l > 120 ? 120 : l )) $P -m pytest -q -p no:cacheprovider \
  -m gpu -x tests/gpu/test_skinny_gemm_gpu.py > $OUT/tests.log 2>&1; at tests $?
tail -3 $OUT/tests.log
for v in main xs main xs; do
  VOXCPM_KERNELS_LIB=${LIB[$v]} timeout 60 $P perf/results/gpu-2026-12-07-run116/rows_probe.py 2>&1 \
    | grep "rows=1[67]\|rows=22" | sed "s/^/$v /" | tee -a $OUT/probe.txt
done
export VOXCPM_LT_CACHE=/tmp/r117_lt.json
ab_libraries main xs
