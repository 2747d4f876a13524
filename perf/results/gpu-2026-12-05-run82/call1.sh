# Issue 5's targets on the H200 after run 80 (which ran on an H100), and run 80 confirmed there.
# 1. main's step at 1, 64 and 256 streams with the profiler's breakdown at 1 and 64 (the one-stream
#    breakdown has not been taken since run 16);
# 2. the interleaved A/B of main against the tree before run 80 (4fd94f9: no locdit_sequence, the
#    scaled gate_up waiting for row_scale to end) at 1 and 64 streams.
# Ask for nvidia-h200: on an H100 the first part says nothing about the targets (run the A/B alone).
# First, on the CPU machine (README.md): the tree and library of 4fd94f9 as trees/pre80 and
# lib_pre80.so.xz, main's library as lib.so.xz, git rev-parse HEAD > commit.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_pre80.so.xz", "build/out/session/commit",
#         "build/out/session/trees/pre80"]
set -u
source perf/device_call_env.sh
R=$OUT/r82; mkdir -p $R
B=$PWD/build/out/session/trees/pre80
unpack_lib build/out/session/lib_pre80.so.xz $B/build/out/lib/libvoxcpm_kernels.so
export VOXCPM_LT_CACHE=/tmp/ab_lt.json
timeout 170 $P perf/profile_step.py --out $R/main --batches 1,64,256 --modes graph_ops --profile-batches 1,64 \
  --budget-s 160 > $R/main.log 2>&1; at profile $?
cat $R/main/profile_step.md
l=$(left 560); [ $l -gt 60 ] && timeout $l $P perf/ab_step.py --out $R/ab --variant pre80@$B --variant main \
  --batches 1,64 --repeats 3 > $R/ab.log 2>&1; at ab $?
tail -4 $R/ab/ab_step.md 2>/dev/null || tail -20 $R/ab.log
