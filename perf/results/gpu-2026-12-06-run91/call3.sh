# Run 91, call 3. On an H200 first: run 90's call 4 (issue 5's step figures). Then, on any GPU: the
# first-window gate (ar_decoder's first_window_wait_ms 10, first_window_streams 16) against none
# (first_window_wait_ms 0). Without MPS the decoder's next step and the vocoder's decode of a new
# stream's first window time-slice the GPU: at one stream a vocoder call took 4.9 ms served (run 90)
# against 0.7 alone. Arms gate off gate off, each a server with bursts at 1, 4, 16 and 64 streams and
# perf_analyzer at concurrency 1.
# Run as `LIMIT=S bash call3.sh`, S the seconds the call may run.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/device"]
set -u
source perf/device_call_env.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  VOXCPM_LT_CACHE=/tmp/r91_lt.json timeout 200 $P perf/profile_step.py --out $OUT/step --batches 1,64,256 \
    --modes graph_ops --profile-batches 64 > $OUT/step.log 2>&1; at step $?
  cat $OUT/step/profile_step.md 2>/dev/null || tail -20 $OUT/step.log
  rm -f $OUT/step/profile_step.json  # the device returns at most 8 files
fi
unset PYTHONPATH VOXCPM_KERNELS_LIB
rm -f build/out/lt_cache.json
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; at setup $?
cp model_repository/ar_decoder/config.pbtxt /tmp/ar_decoder_gate.pbtxt
n=0
for arm in gate off gate off; do
  n=$((n + 1))
  [ "$(left ${LIMIT:-540})" -gt 90 ] || { echo "no time left for $arm"; break; }
  cp /tmp/ar_decoder_gate.pbtxt model_repository/ar_decoder/config.pbtxt
  [ $arm = off ] && sed -i 's/key: "first_window_wait_ms" value: { string_value: "10" }/key: "first_window_wait_ms" value: { string_value: "0" }/' \
    model_repository/ar_decoder/config.pbtxt
  echo "$arm: $(grep 'first_window_wait_ms"' model_repository/ar_decoder/config.pbtxt)"
  LEVELS=1,4,16,64 PA_LEVELS="1" CAMPAIGN_BUDGET_S=$(left ${LIMIT:-540}) OUT=$OUT/$n$arm \
    bash perf/gpu_campaign.sh triton | tail -1
  at $n$arm $?
  grep "^| [0-9]* | [0-9]* | \|^| concurrency \|^| c=.* | vocoder \|^| c=[0-9]* | [0-9]* |" $OUT/$n$arm/summary.md 2>/dev/null
  rm -f $OUT/$n$arm/plots.png $OUT/$n$arm/campaign.log
  [ $n = 1 ] || rm -f $OUT/$n$arm/results.tar.gz  # the device returns at most 8 files
done
rm -rf $OUT/setup
