# Run 86, call 3 (as run, on the machine call 2 left warm): the LocDiT's part at 24, 32 and 40
# streams, against the LMs' and LocEnc's parts alone, to see where it stops paying (call 2: -5.7% at
# 16 streams, +0.8% at 32).
# carry: ["build/out/session/lib_fd.so.xz", "build/out/session/commit"]
cp build/out/session/lib_fd.so.xz build/out/session/lib.so.xz; source perf/device_call_env.sh
R=$OUT/r86c3; mkdir -p $R; export VOXCPM_LT_CACHE=/tmp/r86_lt.json
timeout 400 $P perf/ab_step.py --out $R/ab --variant nodit=VOXCPM_FOLDED_DIT=0 --variant all \
  --batches 24,32,40 --repeats 3 > $R/ab.log 2>&1; at ab $?
tail -5 $R/ab/ab_step.md 2>/dev/null || tail -20 $R/ab.log
