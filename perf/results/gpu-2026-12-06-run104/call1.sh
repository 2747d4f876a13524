# Run 104, call 1: on an H200, run 102's question (main's step at 1 and 64 streams, the first H200
# figures since run 94; runs 95 and 97 landed after it), three interleaved runs of each, then the GPU
# tier's last files. On any other card only those files: run 102's tier stopped at ~97%, before them.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-420}
source perf/device_call_env.sh
export VOXCPM_LT_CACHE=/tmp/r104_lt.json
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  l=$(left $LIMIT); timeout $l $P perf/ab_step.py --out $OUT/ab --variant main --variant main2 --batches 1,64 \
    --repeats 3 > $OUT/ab.log 2>&1; at ab $?
  cat $OUT/ab/ab_step.md 2>/dev/null || tail -20 $OUT/ab.log
  for f in $OUT/ab/main*_*/profile_step.md; do echo $f; cat $f; done > $OUT/per_run.txt
  cat $OUT/per_run.txt
  rm -rf $OUT/ab/main_* $OUT/ab/main2_* $OUT/ab/throwaway
fi
l=$(left $LIMIT); timeout $l $P -m pytest -q -m gpu tests/gpu/test_snake_depthwise_conv_gpu.py tests/gpu/test_snake_gpu.py \
  tests/gpu/test_step_state_gpu.py tests/gpu/test_vocoder_fast_layers_gpu.py tests/gpu/test_vocoder_gpu.py \
  > $OUT/tier_tail.log 2>&1; at tier_tail $?
tail -5 $OUT/tier_tail.log
