# Run 94, the two calls that followed call 2 on the same warm H200 (typed inline; recorded here as
# they ran). The tree was branch wip/attention-o-proj, whose library with VOXCPM_ATTENTION_O_PROJ=0
# runs main's path: every other kernel compiles to main's code. Issue 5's step figures (first H200
# since run 81), then four more runs of the step at 1 and 64 streams.
# carry: ["build/out/session/lib_att.so.xz", "build/out/session/commit"]
# First call:
cp build/out/session/lib_att.so.xz build/out/session/lib.so.xz; source perf/device_call_env.sh
export VOXCPM_ATTENTION_O_PROJ=0 VOXCPM_LT_CACHE=/tmp/r94_lt.json
timeout 250 $P perf/profile_step.py --out $OUT/step --batches 1,64,256 --modes graph_ops --profile-batches 64 \
  > $OUT/step.log 2>&1; at step $?; cat $OUT/step/profile_step.md || tail -20 $OUT/step.log
timeout 100 $P perf/ab_step.py --out $OUT/ab64 --variant off --variant fused=VOXCPM_ATTENTION_O_PROJ=1 --batches 1 \
  --repeats 1 > $OUT/ab64.log 2>&1; at ab1 $?; cat $OUT/ab64/ab_step.md
rm -rf $OUT/ab64/off_* $OUT/ab64/fused_* $OUT/ab64/throwaway
# Second call:
source perf/device_call_env.sh; export VOXCPM_ATTENTION_O_PROJ=0 VOXCPM_LT_CACHE=/tmp/r94_lt.json
timeout 200 $P perf/ab_step.py --out $OUT/ab --variant main --variant main2 --batches 1,64 --repeats 2 > $OUT/ab.log 2>&1
at ab $?; cat $OUT/ab/ab_step.md
for f in $OUT/ab/main*_*/profile_step.md; do echo $f; grep "graph_ops" $f; done
rm -rf $OUT/ab/main_* $OUT/ab/main2_* $OUT/ab/throwaway
