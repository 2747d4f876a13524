# Run 114, call 1: qkv_attention (branch wip/qkv-attention) on whatever card comes. Its GPU tests
# (the op against its reference and the two kernels it replaces, a LocDiT / LocEnc stack with and
# without it), then the step A/B at 1 and 4 streams: fused (the branch as it is) against separate
# (VOXCPM_QKV_ATTENTION=0: normed_linear then short_attention, main's path), same library.
# Needs the branch: git am perf/results/gpu-2026-12-07-run114/qkv_attention.patch on cab01c1 (wip/qkv-attention, deleted).
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_qkv.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-540}
source perf/device_call_env.sh
unpack_variants qkv
export VOXCPM_KERNELS_LIB=${LIB[qkv]}
l=$(left $LIMIT); timeout $(( l > 200 ? 200 : l )) $P -m pytest -q -s -p no:cacheprovider -m gpu -x -rfs \
  tests/gpu/test_qkv_attention_gpu.py tests/gpu/test_normed_layers_gpu.py > $OUT/tests.log 2>&1; at tests $?
tail -15 $OUT/tests.log
grep -h "max |" $OUT/tests.log
export VOXCPM_LT_CACHE=/tmp/r114_lt.json
l=$(left $LIMIT); timeout $l $P perf/ab_step.py --out $OUT/ab --variant fused --variant separate=VOXCPM_QKV_ATTENTION=0 \
  --batches ${AB_BATCHES:-1,4} --repeats ${AB_REPEATS:-3} > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
for f in $OUT/ab/*_*/profile_step.md; do echo $f; cat $f; done > $OUT/per_run.txt 2>/dev/null
grep -h "graph_ops\|first patch" $OUT/per_run.txt
rm -rf $OUT/ab/fused_* $OUT/ab/separate_* $OUT/ab/throwaway
