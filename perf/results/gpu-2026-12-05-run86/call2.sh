# Run 86, call 2: the LocDiT's part of lm_folded_decode.patch, which runs below the Hopper path's
# 1024 rows (2-46 streams), so call 1 (64+ streams) does not time it. The step interleaved at 16 and
# 32 streams (352 and 704 LocDiT rows): "main" (all three parts off), "nodit" (the LMs' and LocEnc's
# parts) and "all" (the patch's default). Run after call 1 passed its GPU tests, on the same library.
# carry: ["build/out/session/lib_fd.so.xz", "build/out/session/commit"]
set -u
cp build/out/session/lib_fd.so.xz build/out/session/lib.so.xz
source perf/device_call_env.sh
R=$OUT/r86c2; mkdir -p $R
export VOXCPM_LT_CACHE=/tmp/r86_lt.json
timeout 560 $P perf/ab_step.py --out $R/ab \
  --variant main=VOXCPM_FOLDED_DECODE=0,VOXCPM_FOLDED_ENCODER=0,VOXCPM_FOLDED_DIT=0 \
  --variant nodit=VOXCPM_FOLDED_DIT=0 --variant all --batches 16,32 --repeats 3 > $R/ab.log 2>&1; at ab $?
tail -5 $R/ab/ab_step.md 2>/dev/null || tail -20 $R/ab.log
