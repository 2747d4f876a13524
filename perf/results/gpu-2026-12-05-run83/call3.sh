# Where mid_gemm's time goes (calls 1-2: 2.5x cuBLAS's time per GEMM at 64 rows, whatever the weight
# prefetch depth). Kernel times only, from diagnostic builds of the depth-4 kernel whose outputs are
# not the product: nomma (the mmas replaced by an integer fold of their operands, loads kept),
# noepi (no split reduction, epilogue or stores: blocks end after the main loop), split1 (one split:
# no cluster), and the plain depth-4 build with programmatic dependent launch off.
# First, on the CPU machine: the diag_*.cu.diff of this folder applied to copies of kernels/ (with
# the depth-4 default), each built for sm_90 and xz'd to build/out/session/lib_<name>.so.xz.
# carry: ["build/out/session/lib_d4.so.xz", "build/out/session/lib_nomma.so.xz", "build/out/session/lib_noepi.so.xz",
#         "build/out/session/lib_split1.so.xz", "build/out/session/lib.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
R=$OUT/r83c3; mkdir -p $R
OPS=mid_gemm,mid_gemm+swiglu
for v in d4 nomma noepi split1; do
  L=$PWD/build/out/lib_$v/libvoxcpm_kernels.so; unpack_lib build/out/session/lib_$v.so.xz $L
  VOXCPM_KERNELS_LIB=$L timeout 60 $P perf/bench_ops.py --out $R/bench_$v.json --quick --no-compile --ops $OPS \
    > $R/bench_$v.log 2>&1; at $v $?
  grep mid_gemm $R/bench_$v.log | grep rows
done
VOXCPM_PDL=0 VOXCPM_KERNELS_LIB=$PWD/build/out/lib_d4/libvoxcpm_kernels.so timeout 60 $P perf/bench_ops.py \
  --out $R/bench_d4_nopdl.json --quick --no-compile --ops $OPS > $R/bench_d4_nopdl.log 2>&1; at nopdl $?
grep mid_gemm $R/bench_d4_nopdl.log | grep rows
