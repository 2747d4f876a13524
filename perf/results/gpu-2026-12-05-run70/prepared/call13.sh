# Prepared in run 78's session: residual_gemm_sm90 (residual_gemm.patch), the CUTLASS GEMM that adds
# into the residual rows and writes the next RMSNorm's per-tile sums of squares, on its own: its GPU
# tests, then its time against cuBLASLt's add + row_scale at the LocDiT's o_proj and down shapes
# (perf/bench_residual_gemm.py). It decides whether the row statistic in the epilogue
# (kernels/NOTES.md, the next candidate) can pay at all: "+ partials" must beat "cuBLASLt add +
# row_scale" by more than the consumers' extra reads will cost.
# First, on the CPU machine: make_tree.sh rg residual_gemm; lib_rg.so.xz built from that tree
# (VOXCPM_CUDA_ARCHS=90 bash build/build_kernels.sh DIR, then xz).
# carry: ["build/out/session/lib_rg.so.xz", "build/out/session/commit", "build/out/session/trees/rg"]
set -u
source perf/device_call_env.sh
mkdir -p /tmp/r79
R=$PWD/build/out/session/trees/rg
unpack_lib build/out/session/lib_rg.so.xz $R/build/out/lib/libvoxcpm_kernels.so
cd $R
export PYTHONPATH=$R VOXCPM_KERNELS_LIB=$R/build/out/lib/libvoxcpm_kernels.so
timeout 120 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_residual_gemm_sm90_gpu.py \
  > /tmp/r79/tests.log 2>&1; at tests $?; tail -3 /tmp/r79/tests.log
l=$(left 400); [ $l -gt 30 ] && timeout $l $P perf/bench_residual_gemm.py --out /tmp/r79/bench.md > /tmp/r79/bench.log 2>&1
at bench $?; cat /tmp/r79/bench.md 2>/dev/null || tail -20 /tmp/r79/bench.log
cd /tmp && tar czf $OUT/r79.tgz r79
