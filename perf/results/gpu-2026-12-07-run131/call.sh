# Run 131 (any card, ~3 minutes): is a 22-row GEMM's activation phase (run 127's ko_act: ~1-1.3 us a
# call) the round trip itself or every block asking L2 for the same lines at once? ko_spread
# (skinny_ko_spread.patch; wrong results, timing only) has each block read its activation chunks
# rotated by its pair index: the same bytes and lines, but at the first round each chunk is asked
# for by about half of an unsplit grid's blocks at once instead of all of them or none. Run 116's
# probe on main and ko_spread, twice, then run 124's LM probe on both. If ko_spread is faster, the
# lever is fewer identical requests (a cluster multicasting the rows); if not, the latency.
# Then split2: main's library with VOXCPM_SKINNY_SPLIT_BLOCKS=2, the split plan filling two blocks a
# multiprocessor (qkv 3 splits at 22 rows, down 8), so a warp has fewer chunks: one round of loads
# where main's take two, for a cluster exchange in qkv and a wider one in down. Last measured in
# run 23 (the step 11% slower), before runs 120-123 made the exchange and the tail cheaper.
# Libraries: bash build/session_libs.sh ko_spread=perf/results/gpu-2026-12-07-run131/skinny_ko_spread.patch
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_ko_spread.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
unpack_variants main ko_spread
probe_rows 2 main ko_spread
probe_lm main ko_spread
LIB[split2]=${LIB[main]}
VOXCPM_SKINNY_SPLIT_BLOCKS=2 probe_rows 2 split2
