# Run 94, call 1: upper bounds, before building anything. What the one-stream step would give back
# if short_attention's kernel (LocDiT and LocEnc at <= 32 rows) or the LMs' rope_kv_write kernel
# were not there at all: branch wip/whatif-skips, whose op wrappers skip the launch when
# VOXCPM_WHATIF_SKIP names the op (wrong outputs; the fixed-shape step costs the same otherwise).
# A fusion of short_attention into o_proj's skinny GEMM (each block computing its heads' attention
# after its programmatic wait), or of rope_kv_write into decode_attention, can at best reach these.
# On an H200 it first profiles main (run 90's call 4: issue 5's step figures).
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
# LIMIT (seconds, default 420) bounds the whole call.
set -u; LIMIT=${LIMIT:-420}
source perf/device_call_env.sh
export VOXCPM_LT_CACHE=/tmp/r94_lt.json
repeats=3
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  timeout 200 $P perf/profile_step.py --out $OUT/step --batches 1,64,256 \
    --modes graph_ops --profile-batches 64 > $OUT/step.log 2>&1; at step $?
  cat $OUT/step/profile_step.md 2>/dev/null || tail -20 $OUT/step.log
  rm -f $OUT/step/profile_step.json $OUT/step/profile_ops.txt  # the device returns at most 8 files
  repeats=2
fi
l=$(left $LIMIT); [ $l -gt 90 ] && timeout $l $P perf/ab_step.py --out $OUT/ab --variant main \
  --variant no_sa=VOXCPM_WHATIF_SKIP=short_attention --variant no_rope=VOXCPM_WHATIF_SKIP=rope_kv_write \
  --variant no_both=VOXCPM_WHATIF_SKIP=short_attention+rope_kv_write \
  --batches 1,64 --repeats $repeats > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
rm -rf $OUT/ab/main_* $OUT/ab/no_*  # per-run profile files: the table holds their step times
