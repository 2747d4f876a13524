# Prepared in run 77's session: main's step as the session leaves it (the 8-warp decode attention
# of run 75, the split plan of 19921d4) at 1-64 streams, at 300 and at 60 cached tokens, with the
# launch-ahead column; the card's name says whether the figures can be set against issue 5's.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"]
set -u
source perf/device_call_env.sh
mkdir -p /tmp/r78
for c in 300 60; do
  l=$(left 140); [ $l -gt 20 ] && VOXCPM_LT_CACHE=/tmp/ab_lt.json timeout $l $P perf/profile_step.py --out /tmp/r78/ctx$c \
    --batches 1,16,32,64 --context $c --modes graph_ops --profile-batches= > /tmp/r78/ctx$c.log 2>&1; at "ctx $c" $?
  grep -A6 "^| mode" /tmp/r78/ctx$c.log | tail -n +3; grep "first patch" /tmp/r78/ctx$c.log
done
cd /tmp && tar czf $OUT/r78.tgz r78
