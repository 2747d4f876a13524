# mid_gemm v3: call 3 found the split reduction (distributed shared memory, one float at a time per
# peer) ~11 us of each call. Now each block reads its slice of every peer's partial products as
# 16-byte words, all loads in flight before any add, splits a power of two, weight depth 4. GPU
# tests (a failure ends the call), kernel times against cuBLAS at 64 rows, then the step at 64
# streams with it on and off, interleaved.
# First, on the CPU machine: lib.so.xz of this tree (VOXCPM_CUDA_ARCHS=90), commit.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
R=$OUT/r83c4; mkdir -p $R
export VOXCPM_LT_CACHE=/tmp/ab_lt.json
timeout 100 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_mid_gemm_gpu.py tests/gpu/test_normed_layers_gpu.py \
  > $R/tests.log 2>&1; rc=$?; at tests $rc
tail -2 $R/tests.log; grep -m8 "^FAILED\|Error" $R/tests.log
[ $rc != 0 ] && exit 1
timeout 40 $P perf/bench_ops.py --out $R/bench.json --quick --no-compile \
  --ops mid_gemm,mid_gemm+swiglu,mid_gemm+rms,mid_gemm+swiglu+rms > $R/bench.log 2>&1; at bench $?
grep mid_gemm $R/bench.log | grep rows
l=$(left 230); [ $l -gt 80 ] && timeout $l $P perf/ab_step.py --out $R/ab --variant cublas=VOXCPM_MID_GEMM=0 \
  --variant mid --batches 64 --repeats 3 > $R/ab.log 2>&1; at ab $?
tail -3 $R/ab/ab_step.md 2>/dev/null || tail -20 $R/ab.log
