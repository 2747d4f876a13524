# Run 114, call 2: qkv_probe.py (us per call in a CUDA graph) with the branch's library.
# Needs the branch: git am perf/results/gpu-2026-12-07-run114/qkv_attention.patch on cab01c1 (wip/qkv-attention, deleted).
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_qkv.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
unpack_variants qkv
export VOXCPM_KERNELS_LIB=${LIB[qkv]}
timeout 200 $P perf/results/gpu-2026-12-07-run114/qkv_probe.py 2>&1 | tee $OUT/probe.txt
