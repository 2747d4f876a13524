# Run on the machine call2.sh left warm, with call2's carry: one profiled step at 64 streams from
# each side (this tree, then main's tree), for the per-kernel view behind call2's A/B. One run each,
# so its step times are a cross-check of call2's, not a second A/B.
source perf/device_call_env.sh >/dev/null
M=$PWD/build/out/session/trees/main
unpack_lib build/out/session/lib_both.so.xz build/out/lib/libvoxcpm_kernels.so
unpack_lib build/out/session/lib.so.xz $M/build/out/lib/libvoxcpm_kernels.so
export VOXCPM_LT_CACHE=/tmp/ab_lt.json
timeout 70 $P perf/profile_step.py --out $OUT/both --batches 64 --modes graph_ops --profile-batches 64 \
  --budget-s 60 > $OUT/both.log 2>&1; at both $?
VOXCPM_KERNELS_LIB=$M/build/out/lib/libvoxcpm_kernels.so timeout 70 $P $M/perf/profile_step.py --out $OUT/main \
  --batches 64 --modes graph_ops --profile-batches 64 --budget-s 60 > $OUT/main.log 2>&1; at main $?
