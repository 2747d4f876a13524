# Run 81, call 2: where the computed statistic stops paying. The patch with a row limit
# (minicpm.ATTENTION_STATISTIC_MAX_ROWS, overridden by VOXCPM_ATTENTION_STATISTIC_MAX_ROWS):
# "computed" (no limit: short_attention always computes it) against "row_scale" (limit 0: the
# row_scale kernel before every folded qkv GEMM, as on main), interleaved, at 64, 96, 128 and 192
# streams (1408, 2112, 2816 and 4224 LocDiT rows); call 1 measured 64 and 256.
# First, on the CPU machine: the patched tree's library as lib_sa.so.xz (README.md), git rev-parse HEAD > commit.
# carry: ["build/out/session/lib_sa.so.xz", "build/out/session/commit"]
set -u
cp build/out/session/lib_sa.so.xz build/out/session/lib.so.xz
source perf/device_call_env.sh
R=$OUT/r81c2; mkdir -p $R
export VOXCPM_LT_CACHE=/tmp/ab_lt.json
timeout 540 $P perf/ab_step.py --out $R/ab --variant computed=VOXCPM_ATTENTION_STATISTIC_MAX_ROWS=1000000 \
  --variant row_scale=VOXCPM_ATTENTION_STATISTIC_MAX_ROWS=0 --batches 64,96,128,192 --repeats 3 > $R/ab.log 2>&1
at ab $?
tail -6 $R/ab/ab_step.md 2>/dev/null || tail -20 $R/ab.log
