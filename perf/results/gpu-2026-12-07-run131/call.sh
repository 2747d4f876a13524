# Run 131 (any card, ~3 minutes): is a 22-row GEMM's activation phase (run 127's ko_act: ~1-1.3 us a
# call) the round trip itself or every block asking L2 for the same lines at once? order
# (skinny_order.patch; every chunk still taken once, its tests run first here) has each block
# start its rounds of chunks at round blockIdx.x % rounds and wrap: right after the wait each
# activation chunk is then asked for by about half of a two-round grid's blocks instead of all of
# them or none, with the same SASS stretch from the wait to the first HMMA as main
# (perf/skinny_sass_stretch.py). skinny_gemm's GPU tests on order, run 116's probe on main and
# order, twice, run 124's LM probe on both. Faster points at fewer identical requests as the lever
# (and order itself to merge, after a step A/B); unchanged, at the round trip's latency.
# Then split2: main's library with VOXCPM_SKINNY_SPLIT_BLOCKS=2, the split plan filling two blocks a
# multiprocessor (qkv 3 splits at 22 rows, down 8), so a warp has fewer chunks: one round of loads
# where main's take two, for a cluster exchange in qkv and a wider one in down. Last measured in
# run 23 (the step 11% slower), before runs 120-123 made the exchange and the tail cheaper.
# Libraries: bash build/session_libs.sh order=perf/results/gpu-2026-12-07-run131/skinny_order.patch
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_order.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
unpack_variants main order
skinny_tests order
probe_rows 2 main order
probe_lm main order
LIB[split2]=${LIB[main]}
VOXCPM_SKINNY_SPLIT_BLOCKS=2 probe_rows 2 split2
