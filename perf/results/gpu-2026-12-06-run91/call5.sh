# Run 91, call 5. On an H200: run 90's call 4 alone (issue 5's step figures at 1 / 64 / 256 streams).
# On any other GPU: the first-window gate as committed (first_window_streams 4) against none at a
# 16-stream burst, the level where call 3's setting (16) did not pay; with 4 the gate should stay out
# of the way there. Arms gate off gate off while time lasts, each a server with one 16-stream burst,
# no MPS.
# Run as `LIMIT=S bash call5.sh`, S the seconds the call may run.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/device"]
set -u
source perf/device_call_env.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  VOXCPM_LT_CACHE=/tmp/r91_lt.json timeout 200 $P perf/profile_step.py --out $OUT/step --batches 1,64,256 \
    --modes graph_ops --profile-batches 64 > $OUT/step.log 2>&1; at step $?
  cat $OUT/step/profile_step.md 2>/dev/null || tail -20 $OUT/step.log
  exit 0
fi
unset PYTHONPATH VOXCPM_KERNELS_LIB
rm -f build/out/lt_cache.json
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; at setup $?
cp model_repository/ar_decoder/config.pbtxt /tmp/ar_decoder_gate.pbtxt
n=0
for arm in gate off gate off; do
  n=$((n + 1))
  [ "$(left ${LIMIT:-200})" -gt 60 ] || { echo "no time left for $arm"; break; }
  cp /tmp/ar_decoder_gate.pbtxt model_repository/ar_decoder/config.pbtxt
  [ $arm = off ] && sed -i 's/key: "first_window_wait_ms" value: { string_value: "10" }/key: "first_window_wait_ms" value: { string_value: "0" }/' \
    model_repository/ar_decoder/config.pbtxt
  echo "$arm: $(grep 'first_window_\(wait_ms\|streams\)"' model_repository/ar_decoder/config.pbtxt | tr '\n' ' ')"
  LEVELS=16 PA_LEVELS=" " CAMPAIGN_BUDGET_S=$(left ${LIMIT:-200}) OUT=$OUT/$n$arm bash perf/gpu_campaign.sh triton | tail -1
  at $n$arm $?
  grep "^| 16 | \|^| c=16 | [0-9]* |" $OUT/$n$arm/summary.md 2>/dev/null
  rm -f $OUT/$n$arm/plots.png $OUT/$n$arm/campaign.log $OUT/$n$arm/results.tar.gz
done
rm -rf $OUT/setup
