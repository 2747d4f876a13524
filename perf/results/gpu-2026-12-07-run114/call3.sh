# Run 114, call 3: qkv_probe.py with the branch's library (qkv: two of a warp's four chunks of
# weights in flight, 2 blocks a multiprocessor) and with round4.diff applied (qkv4: all four in
# flight before the wait, 1 block a multiprocessor), alternating.
# Needs the branch: git am perf/results/gpu-2026-12-07-run114/qkv_attention.patch on cab01c1 (wip/qkv-attention, deleted).
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_qkv.so.xz", "build/out/session/lib_qkv4.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
unpack_variants qkv qkv4
for v in qkv qkv4 qkv qkv4; do
  VOXCPM_KERNELS_LIB=${LIB[$v]} timeout 100 $P perf/results/gpu-2026-12-07-run114/qkv_probe.py 2>&1 | sed "s/^/$v /" | tee -a $OUT/probe.txt
done
