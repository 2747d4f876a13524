# Run 94, call 3: why the attention-fed o_proj (call 2) made the one-stream step 2.3x longer.
# Same library (plus VOXCPM_SKINNY_CARVEOUT, which sets one shared-memory carveout on every
# skinny_gemm instantiation). Arms at one stream, one run each after the throwaway: off (main's path),
# fused, fused without clusters (the split sums through global memory), fused and off with the
# carveout at 100% for every skinny_gemm kernel (no reconfiguration between launches), fused without
# programmatic dependent launch. Then a profile of the fused step at one stream (kernel times).
# carry: ["build/out/session/lib_att.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-300}
cp build/out/session/lib_att.so.xz build/out/session/lib.so.xz
source perf/device_call_env.sh
export VOXCPM_LT_CACHE=/tmp/r94_lt.json
timeout 200 $P perf/ab_step.py --out $OUT/ab --variant off=VOXCPM_ATTENTION_O_PROJ=0 --variant fused \
  --variant fused_nocluster=VOXCPM_SKINNY_CLUSTER=0 --variant fused_carveout=VOXCPM_SKINNY_CARVEOUT=100 \
  --variant off_carveout=VOXCPM_ATTENTION_O_PROJ=0,VOXCPM_SKINNY_CARVEOUT=100 --variant fused_nopdl=VOXCPM_PDL=0 \
  --variant off_nopdl=VOXCPM_ATTENTION_O_PROJ=0,VOXCPM_PDL=0 --batches 1 --repeats 1 > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
rm -rf $OUT/ab/*_0 $OUT/ab/throwaway
l=$(left $LIMIT); [ $l -gt 40 ] && timeout $l $P perf/profile_step.py --out $OUT/prof --batches 1 --modes graph_ops \
  --profile-batches 1 > $OUT/prof.log 2>&1; at prof $?
sed -n '/graph_ops B=1/,/Self CUDA time total/p' $OUT/prof/profile_ops.txt | cut -c1-58,150-260 | head -24
rm -f $OUT/prof/profile_step.json
