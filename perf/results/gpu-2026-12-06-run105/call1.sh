# Run 105, call 1: the LMs' 64-row GEMMs, cuBLAS against swapped-operand CUTLASS GEMMs with cold
# weights (lm_gemm_probe.py; the .so built on the CPU machine from lm_gemm_probe.cu, see its header).
# Then, on an H200 only, run 104's question (main's step at 1 and 64 streams), and on any card the
# GPU tier's last files (run 104's call, which never got a machine).
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/session/lm_gemm_probe.so"]
set -u; LIMIT=${LIMIT:-420}
source perf/device_call_env.sh
timeout $(left $LIMIT) $P perf/results/gpu-2026-12-06-run105/lm_gemm_probe.py build/out/session/lm_gemm_probe.so \
  $OUT/probe 64 > $OUT/probe.log 2>&1; at probe $?
cat $OUT/probe/lm_gemm_probe.md 2>/dev/null || tail -30 $OUT/probe.log
LIMIT=$(left $LIMIT) bash perf/results/gpu-2026-12-06-run104/call1.sh
