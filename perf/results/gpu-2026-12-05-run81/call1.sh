# short_attention computing the folded input norm's statistic itself (short_attention_statistic.patch):
# the row_scale kernel in front of each LocDiT qkv GEMM goes away (108 kernels a step at 64 streams,
# ~2.2 us each plus the boundary), and short_attention reads the norm's input rows (1408 x 1024 at 64
# streams, ~2.9 MB, from L2 after the GEMM read them) before its programmatic wait. A/B against main,
# interleaved, at 64 and 256 streams (run 63's version of this idea lost at 256), after the GPU tests
# of what the patch touches.
# First, on the CPU machine (see README.md): the patch applied to the working tree, its library as
# lib_sa.so.xz, main's as lib.so.xz, main's tree by make_tree.sh main, git rev-parse HEAD > commit.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_sa.so.xz", "build/out/session/commit",
#         "build/out/session/trees/main"]
set -u
source perf/device_call_env.sh
R=$OUT/r81; mkdir -p $R
M=$PWD/build/out/session/trees/main
unpack_lib build/out/session/lib_sa.so.xz build/out/lib/libvoxcpm_kernels.so
unpack_lib build/out/session/lib.so.xz $M/build/out/lib/libvoxcpm_kernels.so
timeout 150 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_folded_norms_gpu.py \
  tests/gpu/test_short_attention_gpu.py tests/gpu/test_graph_runner.py > $R/tests.log 2>&1; at tests $?
tail -1 $R/tests.log; grep -m5 "^FAILED\|Error" $R/tests.log
l=$(left 500); [ $l -gt 60 ] && timeout $l $P perf/ab_step.py --out $R/ab \
  --variant main@$M=VOXCPM_KERNELS_LIB=$M/build/out/lib/libvoxcpm_kernels.so,VOXCPM_LT_CACHE=/tmp/ab_lt.json \
  --variant sa=VOXCPM_LT_CACHE=/tmp/ab_lt.json --batches 64,256 --repeats 3 > $R/ab.log 2>&1; at ab $?
tail -4 $R/ab/ab_step.md 2>/dev/null || tail -20 $R/ab.log
# The per-kernel view, one profiled step each (only if time is left).
l=$(left 550); [ $l -gt 45 ] && export VOXCPM_LT_CACHE=/tmp/ab_lt.json && \
  timeout 45 $P perf/profile_step.py --out $R/sa --batches 64 --modes graph_ops --profile-batches 64 --budget-s 40 \
    > $R/sa.log 2>&1; at profile_sa $?
l=$(left 595); [ $l -gt 45 ] && VOXCPM_KERNELS_LIB=$M/build/out/lib/libvoxcpm_kernels.so timeout 45 \
  $P $M/perf/profile_step.py --out $R/main --batches 64 --modes graph_ops --profile-batches 64 --budget-s 40 \
    > $R/main.log 2>&1; at profile_main $?
