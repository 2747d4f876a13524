# Run 93, call 1: rope_kv_write with every load of a token's items in one round (branch
# wip/rope-one-round) against main. The kernel used to make three serial rounds after its
# programmatic wait (q, then k, then v, each load -> rotate -> store), plus the folded norm's
# statistic from 33 streams on; now each thread loads its first two items, the statistic's row
# loads go out beside them, and only then does anything compute. Same arithmetic: the outputs are
# bit for bit main's. Expected ~1 us less per LM layer, 36 a step: ~0.6% at 1 stream, ~0.3-0.4% at 64.
# On an H200 it first profiles main (run 90's call 4: issue 5's step figures).
# Then: the GPU tests of the op, then main and this interleaved at 1 and 64 streams.
# First, on the CPU machine: VOXCPM_CUDA_ARCHS=90 bash build/build_kernels.sh DIR for main (xz into
# build/out/session/lib.so.xz) and for this branch (lib_rope.so.xz); git rev-parse HEAD > build/out/session/commit.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_rope.so.xz", "build/out/session/commit"]
# LIMIT (seconds, default 420) bounds the whole call.
set -u; LIMIT=${LIMIT:-420}
source perf/device_call_env.sh  # unpacks lib.so.xz (main's kernels) into build/out/lib
MAIN_LIB=$PWD/build/out/lib/main/libvoxcpm_kernels.so; ROPE_LIB=$PWD/build/out/lib/rope/libvoxcpm_kernels.so
unpack_lib build/out/session/lib.so.xz $MAIN_LIB
unpack_lib build/out/session/lib_rope.so.xz $ROPE_LIB
export VOXCPM_LT_CACHE=/tmp/r93_lt.json
repeats=3
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  VOXCPM_KERNELS_LIB=$MAIN_LIB timeout 200 $P perf/profile_step.py --out $OUT/step --batches 1,64,256 \
    --modes graph_ops --profile-batches 64 > $OUT/step.log 2>&1; at step $?
  cat $OUT/step/profile_step.md 2>/dev/null || tail -20 $OUT/step.log
  rm -f $OUT/step/profile_step.json $OUT/step/profile_ops.txt  # the device returns at most 8 files
  repeats=2
fi
VOXCPM_KERNELS_LIB=$ROPE_LIB timeout 150 $P -m pytest -q -p no:cacheprovider -m gpu -rf \
  tests/gpu/test_ops_parity.py tests/gpu/test_folded_decode_gpu.py tests/gpu/test_ops_cuda_graph.py \
  tests/gpu/test_ops_edge_inputs_gpu.py -k "rope or graph or edge" > $OUT/tests.log 2>&1; at tests $?
tail -1 $OUT/tests.log; grep -m8 "^FAILED\|Error" $OUT/tests.log
l=$(left $LIMIT); [ $l -gt 90 ] && timeout $l $P perf/ab_step.py --out $OUT/ab \
  --variant main=VOXCPM_KERNELS_LIB=$MAIN_LIB --variant rope=VOXCPM_KERNELS_LIB=$ROPE_LIB \
  --batches 1,64 --repeats $repeats > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
rm -rf $OUT/ab/main_* $OUT/ab/rope_*  # per-run profile files: the table holds their step times
