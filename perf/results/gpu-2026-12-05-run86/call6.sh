# Run 86, call 6: issue 5's figures on the H200 after run 86 (calls 1-5 got an H100). First main's
# path (every part off) against the patch's default at 64 streams, interleaved; then the step at 1,
# 64 and 256 streams with the one-stream first patch and a profile at 64 streams. ~300 s.
# carry: ["build/out/session/lib_fd.so.xz", "build/out/session/commit"] (the library of 97bcc34 or later)
set -u
cp build/out/session/lib_fd.so.xz build/out/session/lib.so.xz; source perf/device_call_env.sh
R=$OUT/r86c6; mkdir -p $R; export VOXCPM_LT_CACHE=/tmp/r86_lt.json
timeout 230 $P perf/ab_step.py --out $R/ab64 \
  --variant main=VOXCPM_FOLDED_DECODE=0,VOXCPM_FOLDED_ENCODER=0,VOXCPM_FOLDED_DIT=0 --variant both \
  --batches 64 --repeats 3 > $R/ab64.log 2>&1; at ab64 $?
tail -3 $R/ab64/ab_step.md 2>/dev/null || tail -20 $R/ab64.log
l=$(left 580); [ $l -gt 60 ] && timeout $l $P perf/profile_step.py --out $R/step --batches 1,64,256 --modes graph_ops \
  --profile-batches 64 --budget-s $((l - 15)) > $R/step.log 2>&1; at step $?
head -8 $R/step/profile_step.md 2>/dev/null || tail -20 $R/step.log
