# Prepared, not run: decode_attention in blocks of 8 warps where one split per stream leaves at most
# one block per multiprocessor (decode_attention_wide.patch). At 64 streams the base LM's grid is 128
# blocks of 4 warps, one per multiprocessor, and each warp walks ~5 of a stream's 19 key steps at 300
# keys in series: 13.6 us a call in the step, ~0.49 ms of the 64-stream step (run 70). 8 warps halve
# that walk with no combine kernel (2 splits measured slower than 1 in run 9: 11.2 against 10.4 us).
# The call runs the decode_attention GPU tests (4- and 8-warp blocks forced, and the default choice),
# the sweep at 300 and 60 keys, and an interleaved step A/B at 64 streams (4 warps forced against the
# default, one library).
# Before, on the CPU machine, from the repository root:
#   git apply perf/results/gpu-2026-12-05-run70/prepared/decode_attention_wide.patch
#   VOXCPM_CUDA_ARCHS=90 bash build/build_kernels.sh /tmp/libw8
#   xz -c /tmp/libw8/libvoxcpm_kernels.so > build/out/session/lib_w8.so.xz; git rev-parse HEAD > build/out/session/commit
# carry: ["build/out/session"]
set -u
LIB=build/out/session/lib_w8.so.xz
source perf/device_call_env.sh
mkdir -p /tmp/r70c4
timeout 240 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_decode_attention_gpu.py > /tmp/r70c4/tests.log 2>&1
at tests $?; tail -1 /tmp/r70c4/tests.log
for len in 300 60; do
  timeout 90 $P perf/sweep_decode_attention.py --out /tmp/r70c4/sweep_$len.json --batches 16,32,48,64,96,128 \
    --splits 1,2 --length $len --kernels mma4,mma8,mma > /tmp/r70c4/sweep_$len.log 2>&1; at "sweep $len" $?
  grep " best " /tmp/r70c4/sweep_$len.log
done
timeout $(left 560) $P perf/ab_step.py --out /tmp/r70c4/ab --variant warps4=VOXCPM_DECODE_ATTENTION_WARPS=4,VOXCPM_LT_CACHE=/tmp/ab_lt.json \
  --variant auto=VOXCPM_LT_CACHE=/tmp/ab_lt.json --batches 64 --repeats 3 > /tmp/r70c4/ab.log 2>&1; at ab $?
tail -4 /tmp/r70c4/ab/ab_step.md 2>/dev/null
cd /tmp && tar czf $OUT/r70c4.tgz r70c4
