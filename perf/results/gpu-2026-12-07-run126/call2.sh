# Run 126, call 2 (prepared, not run): the next session's first call, whatever card comes. On an
# H200: issue 5's figures there (none since run 94): main (this session's push merged) against prev
# (7a6c953, before it), interleaved, AB_REPEATS (3) runs each at 1 and 64 streams, then main alone
# at 256 streams (saturation) with the time left (~9 minutes). On any other card: call 1.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_prev.so.xz",
#         "build/out/session/lib_deep.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-540}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  source perf/device_call_env.sh
  unpack_variants main prev
  export VOXCPM_LT_CACHE=/tmp/r126_lt.json
  LIMIT=$(( LIMIT - 90 )) AB_BATCHES=1,64 AB_REPEATS=${AB_REPEATS:-3} ab_libraries main prev
  l=$(left $LIMIT); [ $l -gt 60 ] && timeout $l $P perf/profile_step.py --out $OUT/step --batches 256 --modes graph_ops \
    > $OUT/step.log 2>&1; at step $?
  cat $OUT/step/profile_step.md 2>/dev/null || tail -5 $OUT/step.log
  pack_outputs per_run.txt ab.log profile_step.md
else
  LIMIT=$LIMIT bash perf/results/gpu-2026-12-07-run126/call1.sh
fi
