# Run 133 (any card, ~4.5 minutes): the step A/B of run 131's order against main, its GPU tests
# having passed there (485). Run 131's probes put order 0.16-0.18 us a call under main for each of
# the one-stream LocDiT's 22-row GEMMs and 0.74 us under main for an LM layer's four at one row:
# about 0.08 ms of a 4.8 ms step if the probes' gains hold in the graph. AB_BATCHES (1,4),
# AB_REPEATS (3) runs each, as run 130.
# Libraries: bash build/session_libs.sh order=perf/results/gpu-2026-12-07-run131/skinny_order.patch
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_order.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-300}
source perf/device_call_env.sh
unpack_variants main order
export VOXCPM_LT_CACHE=/tmp/r133_lt.json
AB_BATCHES=${AB_BATCHES:-1,4} AB_REPEATS=${AB_REPEATS:-3} ab_libraries main order
pack_outputs per_run.txt ab.log
