# Run 111, call 1: run 110's call 4 made for an H200, where issue 5's 64-stream figure is still run
# 94's; built and carried as call 4 says, from the same wip branch (gate_up_64x128.patch applied).
# On an H200: the op's GPU tests, one sweep, then the step A/B at 64 and 1 streams: new (the tuning
# free to choose pingpong 64 x 128) against old (VOXCPM_GATE_UP_ONLY=0,1: main's two schedules, so
# old is main's step with the same library), 3 repeats; then 256 streams with time left. On any
# other card: call 4 itself. (It got an H100 and ran call 4, whose A/B could not start: ab_step
# splits a variant's settings at commas, so "old=VOXCPM_GATE_UP_ONLY=0,1" is not a variant.)
# carry: ["build/out/session/lib_wip.so.xz", "build/out/session/lib.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-420}
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  LIMIT=270 bash perf/results/gpu-2026-12-07-run110/call4.sh; exit
fi
source perf/device_call_env.sh
unpack_variants wip
export VOXCPM_KERNELS_LIB=${LIB[wip]} VOXCPM_LT_CACHE=/tmp/r110_lt.json
timeout $(left $LIMIT) $P -m pytest -q -m gpu tests/gpu/test_gate_up_sm90_gpu.py > $OUT/tests.log 2>&1; at tests $?
tail -3 $OUT/tests.log
timeout $(left $LIMIT) $P -m perf.gate_up_sweep --streams 56,58,60,64,66,69,72 --out $OUT/sweep_1.md > $OUT/sweep_1.log 2>&1
at sweep_1 $?; cut -d'|' -f2,3,6-11 $OUT/sweep_1.md
timeout $(left $LIMIT) $P perf/ab_step.py --out $OUT/ab --variant new --variant old=VOXCPM_GATE_UP_ONLY=0,1 \
  --batches 64,1 --repeats ${AB_REPEATS:-3} > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
for f in $OUT/ab/*_*/profile_step.md; do echo $f; cat $f; done > $OUT/per_run.txt 2>/dev/null
grep -h "graph_ops\|first patch" $OUT/per_run.txt
rm -rf $OUT/ab/new_* $OUT/ab/old_* $OUT/ab/throwaway
l=$(left $LIMIT); [ $l -gt 60 ] && timeout $l $P perf/profile_step.py --out $OUT/step --batches 256 --modes graph_ops \
  > $OUT/step.log 2>&1; at step $?
cat $OUT/step/profile_step.md 2>/dev/null || tail -5 $OUT/step.log
