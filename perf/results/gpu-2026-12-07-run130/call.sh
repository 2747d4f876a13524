# Run 130 (any card, ~6 minutes): lone (skinny_lone.patch: eight chunks in flight a warp only where
# the grid is unsplit and at most one block a multiprocessor, the LMs' qkv at one stream; run 126's
# deep took eight at every one-row shape and lost on the rest) against main. skinny_gemm's GPU tests
# on lone, run 124's LM probe on main and lone, then the step A/B: on an H200 at 1 and 64 streams,
# two runs each (issue 5's H200 figures, none since run 94); on any other card at AB_BATCHES (1,4),
# AB_REPEATS (3) runs each.
# Libraries: bash build/session_libs.sh lone=perf/results/gpu-2026-12-07-run130/skinny_lone.patch
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_lone.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-420}
source perf/device_call_env.sh
unpack_variants main lone
skinny_tests lone
probe_lm main lone
export VOXCPM_LT_CACHE=/tmp/r130_lt.json
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  AB_BATCHES=1,64 AB_REPEATS=2 ab_libraries main lone
else
  AB_BATCHES=${AB_BATCHES:-1,4} AB_REPEATS=${AB_REPEATS:-3} ab_libraries main lone
fi
pack_outputs lm_probe.txt 'tests_*.log' per_run.txt ab.log
