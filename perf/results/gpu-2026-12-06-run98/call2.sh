# Run 98, call 2: issue 5's step figures for main on an H200 (the targets are the H200's; runs 95 and
# 97 are unmeasured there). On any other GPU it stops at once: an H100 figure adds nothing to call 1.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-400}
source perf/device_call_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: stopped"; exit 0; }
export VOXCPM_LT_CACHE=/tmp/r98_lt.json
# Two arms of the same tree: ab_step takes at least two variants (run 97's call 5 gave it one; its H200
# branch never ran), and the pair shows the runs' spread.
l=$(left $LIMIT); timeout $l $P perf/ab_step.py --out $OUT/h200 --variant main --variant main2 --batches 1,64 \
  --repeats 2 > $OUT/h200.log 2>&1; at h200 $?
cat $OUT/h200/ab_step.md 2>/dev/null || tail -20 $OUT/h200.log
cp $OUT/h200/main_0/profile_step.md $OUT/h200_profile_step.md 2>/dev/null; rm -rf $OUT/h200/main_* $OUT/h200/main2_* $OUT/h200/throwaway
