# Run 97, call 3: short_attention trimmed (branch wip/short-attention-trim; lib_trim): rotated rows
# rounded once by their store (rotate_pairs rounded them to T first, then the store rounded again:
# same bits, 32 instructions an item), each staged row resolved once, shared-memory stores, and the
# output loop carrying (head, token) from row to row. lib_b4: the same with kStageBatch 4 (call 2's
# ncu: 792 items a 256-thread block at 64 streams, so 24 threads take a second L2 round trip while
# the block waits at its barrier). Outputs bit-equal to main's by construction.
# First the GPU tests of the op on both, then the kernel alone (perf/short_attention_probe.py: 64
# streams' shape with the statistic in the kernel and given, one stream's), three libraries
# interleaved twice, then the step (ab_step) main against the faster of trim / b4 at 1 and 64 streams.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_trim.so.xz", "build/out/session/lib_b4.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-570}
source perf/device_call_env.sh
declare -A LIB
for v in main trim b4; do
  LIB[$v]=$PWD/build/out/lib/$v/libvoxcpm_kernels.so
  unpack_lib build/out/session/$([ $v = main ] && echo lib || echo lib_$v).so.xz ${LIB[$v]}
done
export VOXCPM_LT_CACHE=/tmp/r97_lt.json
for v in trim b4; do
  VOXCPM_KERNELS_LIB=${LIB[$v]} timeout 90 $P -m pytest -q -p no:cacheprovider -m gpu -rf \
    tests/gpu/test_short_attention_gpu.py tests/gpu/test_folded_norms_gpu.py > $OUT/tests_$v.log 2>&1; at tests_$v $?
  tail -1 $OUT/tests_$v.log; grep -m6 "^FAILED\|Error" $OUT/tests_$v.log
done
for rep in 1 2; do for v in main trim b4; do
  VOXCPM_KERNELS_LIB=${LIB[$v]} $P perf/short_attention_probe.py --cases 128:input,128:given,2:input --time \
    2>&1 | sed "s/^/$v /"
done; done | tee $OUT/probe.txt
best=$(python3 - $OUT/probe.txt <<'PY'
import sys, collections
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) > 3 and "sequences=128" in line and "scales=input" in line:
        t[parts[0]].append(float(parts[-2]))
print(min(("trim", "b4"), key=lambda v: min(t.get(v, [1e9]))))
PY
)
echo "step A/B: main against $best"
grep -q " passed" $OUT/tests_$best.log && ! grep -q "^FAILED" $OUT/tests_$best.log || exit 0
l=$(left $LIMIT); [ $l -gt 100 ] && timeout $l $P perf/ab_step.py --out $OUT/ab \
  --variant main=VOXCPM_KERNELS_LIB=${LIB[main]} --variant $best=VOXCPM_KERNELS_LIB=${LIB[$best]} \
  --batches 1,64 --repeats 3 > $OUT/ab.log 2>&1; at ab $?
cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
rm -rf $OUT/ab/main_* $OUT/ab/${best}_* $OUT/ab/throwaway
