# mid_gemm (kernels/mid_gemm.cu: the skinny_gemm op at 33-64 rows on Hopper, so the LMs at 33-64
# streams run their norms, SwiGLU and residual adds inside PDL-chained GEMMs instead of cuBLAS and
# separate kernels): its GPU tests, its kernel times against cuBLAS at 64 rows, then the step with it
# on and off (VOXCPM_MID_GEMM=0) at 2 streams (the LocDiT's 44 rows), 48 and 64, interleaved.
# First, on the CPU machine: VOXCPM_CUDA_ARCHS=90 bash build/build_kernels.sh /tmp/lib_main,
# xz -c /tmp/lib_main/libvoxcpm_kernels.so > build/out/session/lib.so.xz, git rev-parse HEAD > build/out/session/commit.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
R=$OUT/r83; mkdir -p $R
export VOXCPM_LT_CACHE=/tmp/ab_lt.json
timeout 170 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_mid_gemm_gpu.py tests/gpu/test_skinny_gemm_gpu.py \
  tests/gpu/test_normed_layers_gpu.py > $R/tests.log 2>&1; rc=$?; at tests $rc
tail -3 $R/tests.log; grep -m8 "^FAILED\|Error" $R/tests.log
[ $rc = 124 ] && exit 1  # a hang: nothing after it can be trusted
timeout 60 $P perf/bench_ops.py --out $R/bench_mid.json --quick --no-compile \
  --ops mid_gemm,mid_gemm+swiglu,mid_gemm+rms,mid_gemm+swiglu+rms > $R/bench.log 2>&1; at bench $?
tail -8 $R/bench.log
l=$(left 480); [ $l -gt 90 ] && timeout $l $P perf/ab_step.py --out $R/ab --variant cublas=VOXCPM_MID_GEMM=0 \
  --variant mid --batches 2,48,64 --repeats 3 > $R/ab.log 2>&1; at ab $?
tail -5 $R/ab/ab_step.md 2>/dev/null || tail -20 $R/ab.log
l=$(left 570); [ $l -gt 50 ] && timeout $l $P perf/profile_step.py --out $R/prof --batches 64 --modes graph_ops \
  --profile-batches 64 --budget-s $((l - 10)) > $R/prof.log 2>&1; at profile $?
