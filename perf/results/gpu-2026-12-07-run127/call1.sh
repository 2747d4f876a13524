# Run 127, call 1 (prepared, not run): where a skinny GEMM's time past its boundary and its bytes
# goes, by knockouts (each a patch that drops one phase; wrong results, timing only): ko_act (no
# activation loads after the wait), ko_reduce (the block's reduction reads one warp's sums, not
# eight), ko_exchange (a cluster's blocks send and wait for nothing), ko_norm (the loop neither sums
# squares nor multiplies by the gain). Run 116's probe (the LocDiT's GEMMs at 8-24 rows) on main and
# each, twice; then run 124's LM probe on each. Any card, ~4 minutes. No tests: the outputs are wrong.
# Libraries: bash build/session_libs.sh ko_act=perf/results/gpu-2026-12-07-run127/skinny_ko_act.patch \
#   ko_reduce=perf/results/gpu-2026-12-07-run127/skinny_ko_reduce.patch \
#   ko_exchange=perf/results/gpu-2026-12-07-run127/skinny_ko_exchange.patch \
#   ko_norm=perf/results/gpu-2026-12-07-run127/skinny_ko_norm.patch
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_ko_act.so.xz", "build/out/session/lib_ko_reduce.so.xz",
#         "build/out/session/lib_ko_exchange.so.xz", "build/out/session/lib_ko_norm.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
VARIANTS="main ko_act ko_reduce ko_exchange ko_norm"
unpack_variants $VARIANTS
probe_rows 2 $VARIANTS
probe_lm $VARIANTS
