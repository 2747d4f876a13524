# Run 110, call 4 (prepared 2026-12-07; run as run 111 on an H100, whose sweep rejected 64 x 128,
# and whose A/B could not start: ab_step then refused values with commas): a third gate_up schedule,
# pingpong 64 x 128 tiles without a cluster. To run it: `git am` gate_up_64x128.patch (this folder)
# on a wip branch, build its library (VOXCPM_CUDA_ARCHS=90 VOXCPM_REQUIRE_SM90=1
# VOXCPM_CUTLASS_INCLUDE=... bash build/build_kernels.sh DIR), xz it to build/out/session/lib_wip.so.xz,
# write the branch's HEAD to build/out/session/commit, and call this from that branch (~4 minutes).
# Calls 2-3 showed the 64 x 256 kernel's time in steps of whole rounds (flat from 60 to 69
# streams). At 64 streams 64 x 128 tiles make 1408 tiles, 10.67 a multiprocessor against 11 rounds
# (3% idle instead of 11%), for smaller tiles' lower efficiency. The GPU tests of the op with the
# new schedule, the sweep twice, then the step with the tuning free to choose it (new) against the
# tuning limited to main's two schedules (old, VOXCPM_GATE_UP_ONLY=0,1), same library.
# carry: ["build/out/session/lib_wip.so.xz", "build/out/session/lib.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-280}
source perf/device_call_env.sh
unpack_variants wip
export VOXCPM_KERNELS_LIB=${LIB[wip]} VOXCPM_LT_CACHE=/tmp/r110_lt.json
timeout $(left $LIMIT) $P -m pytest -q -m gpu tests/gpu/test_gate_up_sm90_gpu.py > $OUT/tests.log 2>&1; at tests $?
tail -3 $OUT/tests.log
for i in 1 2; do
  timeout $(left $LIMIT) $P -m perf.gate_up_sweep --streams 56,58,60,64,66,69,72 --out $OUT/sweep_$i.md > $OUT/sweep_$i.log 2>&1
  at sweep_$i $?; cut -d'|' -f2,3,6-11 $OUT/sweep_$i.md
done
l=$(left $LIMIT); [ $l -gt 100 ] && timeout $l $P perf/ab_step.py --out $OUT/ab --variant new --variant old=VOXCPM_GATE_UP_ONLY=0,1 \
  --batches 64 --repeats ${AB_REPEATS:-2} > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
rm -rf $OUT/ab/new_* $OUT/ab/old_* $OUT/ab/throwaway
