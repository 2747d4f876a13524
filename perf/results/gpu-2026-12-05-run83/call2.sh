# mid_gemm, second version (call 1: correct, 2.6x slower than cuBLAS per GEMM, the step +13%): the
# activations through a 4-stage cp.async ring of 128-k stages, the weight through a register ring
# refilled chunk by chunk, 8 chunks deep (lib.so.xz) or 4 (lib_d4.so.xz: no spills). GPU tests on the
# depth-8 library, kernel times of both against cuBLAS at 64 rows, then the step at 2 and 64 streams:
# cuBLAS (VOXCPM_MID_GEMM=0) against both depths, interleaved.
# First, on the CPU machine: lib.so.xz as in call1.sh; the depth-4 library from a copy of kernels/
# with VOXCPM_MID_GEMM_DEPTH defined 4, xz'd to build/out/session/lib_d4.so.xz; commit.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_d4.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
R=$OUT/r83c2; mkdir -p $R
D4=$PWD/build/out/lib_d4/libvoxcpm_kernels.so
unpack_lib build/out/session/lib_d4.so.xz $D4
export VOXCPM_LT_CACHE=/tmp/ab_lt.json
timeout 120 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_mid_gemm_gpu.py tests/gpu/test_normed_layers_gpu.py \
  > $R/tests.log 2>&1; rc=$?; at tests $rc
tail -2 $R/tests.log; grep -m8 "^FAILED\|Error" $R/tests.log
[ $rc = 124 ] && exit 1  # a hang: nothing after it can be trusted
OPS=mid_gemm,mid_gemm+swiglu,mid_gemm+rms,mid_gemm+swiglu+rms
timeout 60 $P perf/bench_ops.py --out $R/bench_d8.json --quick --no-compile --ops $OPS > $R/bench_d8.log 2>&1; at bench8 $?
VOXCPM_KERNELS_LIB=$D4 timeout 60 $P perf/bench_ops.py --out $R/bench_d4.json --quick --no-compile --ops $OPS \
  > $R/bench_d4.log 2>&1; at bench4 $?
tail -6 $R/bench_d8.log; tail -6 $R/bench_d4.log
l=$(left 570); [ $l -gt 90 ] && timeout $l $P perf/ab_step.py --out $R/ab --variant cublas=VOXCPM_MID_GEMM=0 \
  --variant mid8 --variant mid4=VOXCPM_KERNELS_LIB=$D4 --batches 2,64 --repeats 3 > $R/ab.log 2>&1; at ab $?
tail -4 $R/ab/ab_step.md 2>/dev/null || tail -20 $R/ab.log
