# Prepared for the next session, first call: what run 74's H100 calls did not reach, then the A/B
# that decides the two patches, on whichever card comes (interleaved, so valid on either):
# - main: the vocoder's GPU tests and the edge-input tests (a misaligned decode_attention
#   workspace), ~20 tests that took more than 90 s on the H100;
# - build/out/session/trees/both (make_tree.sh both decode_attention_wide row_scale_beside): the
#   four graph-runner tests call 17 did not reach;
# - main against both at 64 streams, 3 repeats (run 74's 2 repeats on the H100: -1.6%, inside the
#   spread).
# Libraries: lib.so.xz (main, kernels of the commit that tightened skinny_gemm's kMaxNormK) and
# lib_w8.so.xz (both, b6c358a's kernels: they differ in that bound alone), for sm_90.
# carry: ["build/out/session"]
set -u
source perf/device_call_env.sh
mkdir -p /tmp/r75c9
timeout 200 $P -m pytest -q -p no:cacheprovider --durations=12 -m gpu tests/gpu/test_vocoder_fast_layers_gpu.py tests/gpu/test_vocoder_gpu.py \
  tests/gpu/test_ops_edge_inputs_gpu.py > /tmp/r75c9/main_tests.log 2>&1; at "main tests" $?
grep -A14 "slowest" /tmp/r75c9/main_tests.log; tail -1 /tmp/r75c9/main_tests.log
B=$PWD/build/out/session/trees/both
BL=$B/build/out/lib/libvoxcpm_kernels.so
unpack_lib build/out/session/lib_w8.so.xz $BL
(cd $B && PYTHONPATH=$B VOXCPM_KERNELS_LIB=$BL timeout 150 $P -m pytest -q -p no:cacheprovider -m gpu \
  tests/gpu/test_graph_runner.py > /tmp/r75c9/both_tests.log 2>&1); at "both graph-runner tests" $?; tail -1 /tmp/r75c9/both_tests.log
l=$(left 585); [ $l -gt 60 ] && timeout $l $P perf/ab_step.py --out /tmp/r75c9/ab --variant main=VOXCPM_LT_CACHE=/tmp/ab_lt.json \
  --variant both@$B=VOXCPM_LT_CACHE=/tmp/ab_lt.json --batches 64 --repeats 3 > /tmp/r75c9/ab.log 2>&1; at ab $?
tail -3 /tmp/r75c9/ab/ab_step.md 2>/dev/null
cd /tmp && tar czf $OUT/r75c9.tgz r75c9
