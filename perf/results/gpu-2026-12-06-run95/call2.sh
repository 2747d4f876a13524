# Run 95, call 2: on an H200 only (any other GPU: stops at once, costing only the start). Main with
# the fold (the library of call 1, whose kernels are main's) against VOXCPM_DECODE_ROPE=0 at 1 and
# 64 streams: issue 5's step figures on the H200 with run 95 in them, and the fold measured there.
# carry: ["build/out/session/lib_rd.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-200}
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: nothing run"; exit 0; }
cp build/out/session/lib_rd.so.xz build/out/session/lib.so.xz
source perf/device_call_env.sh
export VOXCPM_LT_CACHE=/tmp/r95_lt.json
timeout $(left $LIMIT) $P perf/ab_step.py --out $OUT/ab --variant main --variant off=VOXCPM_DECODE_ROPE=0 \
  --batches 1,64 --repeats 2 > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
for f in $OUT/ab/*_*/profile_step.md; do echo "$f"; grep 'graph_ops |' $f; done
rm -rf $OUT/ab/main_* $OUT/ab/off_* $OUT/ab/throwaway
