# Prepared in run 76's session: decode_attention's split plan with one split per stream from 16
# streams on (19921d4) against the plan before it (HEAD~1, in build/out/session/trees/before: `git
# archive HEAD~1`, perf/results left out), after run 76's sweep: the GPU tests that use the default
# split count, then the interleaved step A/B at 16 and 32 streams (300 cached keys, where one split
# gains least).
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/session/trees/before"]
set -u
source perf/device_call_env.sh
mkdir -p /tmp/r76c11
timeout 120 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_decode_attention_gpu.py tests/gpu/test_graph_runner.py \
  > /tmp/r76c11/tests.log 2>&1; at tests $?; tail -1 /tmp/r76c11/tests.log
l=$(left 400); [ $l -gt 60 ] && timeout $l $P perf/ab_step.py --out /tmp/r76c11/ab \
  --variant before@$PWD/build/out/session/trees/before=VOXCPM_KERNELS_LIB=$VOXCPM_KERNELS_LIB,VOXCPM_LT_CACHE=/tmp/ab_lt.json \
  --variant after=VOXCPM_LT_CACHE=/tmp/ab_lt.json --batches 16,32 --repeats 2 > /tmp/r76c11/ab.log 2>&1; at ab $?
tail -4 /tmp/r76c11/ab/ab_step.md 2>/dev/null
cd /tmp && tar czf $OUT/r76c11.tgz r76c11
