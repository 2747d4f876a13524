# Run 108, call 1: issue 5's step with run 107's short_attention (main, lib.so.xz, built at 388e200)
# against the library before it (prev, lib_prev.so.xz, built at caf4925), interleaved, AB_REPEATS (3)
# runs each at AB_BATCHES (64,1) streams; then, with time left, main alone at 64 (the torch profiler's
# breakdown) and 256 streams (saturation). Meant for an H200 (run 94's figures are the last there);
# on an H100 the A/B repeats run 107's.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_prev.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-420}
source perf/device_call_env.sh
unpack_variants main prev
export VOXCPM_LT_CACHE=/tmp/r108_lt.json
l=$(left $LIMIT); timeout $l $P perf/ab_step.py --out $OUT/ab --variant main=VOXCPM_KERNELS_LIB=${LIB[main]} \
  --variant prev=VOXCPM_KERNELS_LIB=${LIB[prev]} --batches ${AB_BATCHES:-64,1} --repeats ${AB_REPEATS:-3} \
  > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
for f in $OUT/ab/*_*/profile_step.md; do echo $f; cat $f; done > $OUT/per_run.txt 2>/dev/null
grep -h "graph_ops\|first patch" $OUT/per_run.txt
rm -rf $OUT/ab/main_* $OUT/ab/prev_* $OUT/ab/throwaway
l=$(left $LIMIT); [ $l -gt 70 ] && timeout $l $P perf/profile_step.py --out $OUT/step --batches 64,256 --modes graph_ops \
  --profile-batches 64 > $OUT/step.log 2>&1; at step $?
cat $OUT/step/profile_step.md 2>/dev/null || tail -5 $OUT/step.log
