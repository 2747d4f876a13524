# Run 116, call 2: rows_probe.py for main's library and for u4 (branch wip/skinny-u4: four chunks of
# weights in flight a warp at 17-24 rows too, ~250 bytes of spills), alternating.
# Needs the branch: git am perf/results/gpu-2026-12-07-run116/skinny_u4.patch on 2680b1d (wip/skinny-u4, deleted).
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_u4.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
unpack_variants main u4
for v in main u4 main u4; do
  VOXCPM_KERNELS_LIB=${LIB[$v]} timeout 60 $P perf/results/gpu-2026-12-07-run116/rows_probe.py 2>&1 \
    | grep "rows=1[67]\|rows=22" | sed "s/^/$v /" | tee -a $OUT/probe.txt
done
