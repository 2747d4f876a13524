# Run 125, call 1: boundary_probe.cu (what a kernel boundary in the step's chain costs: plain graph
# order, programmatic launch with griddepcontrol.wait, a flag the previous kernel's blocks raise,
# a grid barrier in one persistent kernel), then run 124's LM probe on main and fill1. ~1 minute,
# any card: the short call for a session with little device time left.
# Built on the CPU machine: nvcc -O3 -std=c++17 -arch=sm_90 -o probe boundary_probe.cu, then
# xz -c probe > build/out/session/boundary_probe.xz; run 124's libraries.
# carry: ["build/out/session/boundary_probe.xz", "build/out/session/lib.so.xz",
#         "build/out/session/lib_fill1.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
unpack_lib build/out/session/boundary_probe.xz /tmp/boundary_probe
chmod +x /tmp/boundary_probe
timeout 60 /tmp/boundary_probe 1000 20 2>&1 | tee $OUT/boundary_probe.txt; at boundary ${PIPESTATUS[0]}
unpack_variants main fill1
for v in main fill1; do
  VOXCPM_KERNELS_LIB=${LIB[$v]} timeout 60 $P perf/results/gpu-2026-12-07-run124/lm_rows_probe.py 2>&1 \
    | sed "s/^/$v /" | tee -a $OUT/lm_probe.txt; at lm_probe_$v ${PIPESTATUS[0]}
done
