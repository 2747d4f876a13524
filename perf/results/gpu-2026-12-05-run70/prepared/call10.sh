# Prepared in run 75's session: the decode_attention split plan below 48 streams, now that one
# split per stream runs in 8-warp blocks where it leaves at most one block per multiprocessor (run 75:
# at 32 streams and 300 keys the plan's 4 splits took 9.1 us, one split 7.2). The default choice of
# block size ("mma") at 1-48 streams, 1/2/4/8 splits, 60 and 300 cached keys and a ragged 1..300
# mix; then main's step at 60 cached tokens (a 30-token text generating 50 patches holds ~57 on
# average; every step figure since run 1 used 300) at 1, 16, 32 and 64 streams.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit"] (main's library, sm_90)
set -u
source perf/device_call_env.sh
mkdir -p /tmp/r76c10
for v in 300 60 300r; do
  ragged=; [ $v = 300r ] && ragged=--ragged
  timeout 90 $P perf/sweep_decode_attention.py --out /tmp/r76c10/sweep_$v.json --batches 1,2,4,8,16,24,32,48 \
    --splits 1,2,4,8 --length ${v%r} --kernels mma $ragged > /tmp/r76c10/sweep_$v.log 2>&1; at "sweep $v" $?
  grep " best " /tmp/r76c10/sweep_$v.log
done
l=$(left 400); [ $l -gt 60 ] && VOXCPM_LT_CACHE=/tmp/ab_lt.json timeout $l $P perf/profile_step.py --out /tmp/r76c10/ctx60 \
  --batches 1,16,32,64 --context 60 --modes graph_ops --profile-batches= > /tmp/r76c10/ctx60.log 2>&1; at ctx60 $?
grep -A6 "^| mode" /tmp/r76c10/ctx60.log | tail -n +3
cd /tmp && tar czf $OUT/r76c10.tgz r76c10
