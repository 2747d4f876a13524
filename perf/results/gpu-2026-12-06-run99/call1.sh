# Run 99, call 1 (prepared in stop 49's session, not run yet): what the 64-stream step would give back
# without the row_scale kernel before each LocDiT gate_up (108 a step at 64 streams, 2.1 us each on
# the H200 in run 94's profile, plus the boundary after o_proj). An upper bound for computing that
# statistic inside the gate_up kernel itself (kernels/NOTES.md, the producer-warp candidate). Apply
# whatif_row_scale.patch first (`git am`): its row_scale op skips the launch when VOXCPM_WHATIF_SKIP
# names it (wrong outputs; the fixed-shape step costs the same otherwise). One stream does not run
# row_scale (its LocDiT GEMMs normalise in skinny_gemm), so B=1 is the runs' noise control.
# On an H200 the main arm is also issue 5's step figures after runs 95 and 97.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-400}
source perf/device_call_env.sh
export VOXCPM_LT_CACHE=/tmp/r99_lt.json
l=$(left $LIMIT); timeout $l $P perf/ab_step.py --out $OUT/ab --variant main \
  --variant no_rs=VOXCPM_WHATIF_SKIP=row_scale --batches 1,64 --repeats 3 > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
cp $OUT/ab/main_0/profile_step.md $OUT/main_profile_step.md 2>/dev/null
rm -rf $OUT/ab/main_* $OUT/ab/no_rs_* $OUT/ab/throwaway
