# Run 102, call 1: main's step on an H200 (the first since run 94; runs 95 and 97, the RoPE fold into
# the decode attention and the trimmed short_attention, landed after it). Issue 5's figures at 1 and
# 64 streams (no profile, no 256: little device time left), then more runs of both for their spread.
# On any other card nothing runs: these figures are the H200's.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-330}
source perf/device_call_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing run"; exit 0; }
export VOXCPM_LT_CACHE=/tmp/r102_lt.json
timeout 200 $P perf/profile_step.py --out $OUT/step --batches 1,64 --modes graph_ops --profile-batches "" \
  > $OUT/step.log 2>&1; at step $?
cat $OUT/step/profile_step.md 2>/dev/null || tail -20 $OUT/step.log
l=$(left $LIMIT); timeout $l $P perf/ab_step.py --out $OUT/ab --variant main --variant main2 --batches 1,64 \
  --repeats 2 > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
for f in $OUT/ab/main*_*/profile_step.md; do echo $f; grep "graph_ops" $f; done
rm -rf $OUT/ab/main_* $OUT/ab/main2_* $OUT/ab/throwaway
