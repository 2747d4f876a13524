# Run 91, call 4. Call 3's A/B (the first-window gate, first_window_wait_ms 10, against none) served
# under CUDA MPS (VOXCPM_MPS=1 build/tritonserver.sh: launch-ahead on, the decoder's kernels at a
# lower priority), where the two processes share the multiprocessors instead of time-slicing them.
# Arms gate off gate off, each a server with bursts at 1, 4 and 16 streams and perf_analyzer at
# concurrency 1. No H200 branch: call 3 asked and got an H100.
# Run as `LIMIT=S bash call4.sh`, S the seconds the call may run.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/device"]
set -u
source perf/device_call_env.sh
unset PYTHONPATH VOXCPM_KERNELS_LIB
rm -f build/out/lt_cache.json
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; at setup $?
cp model_repository/ar_decoder/config.pbtxt /tmp/ar_decoder_gate.pbtxt
n=0
for arm in gate off gate off; do
  n=$((n + 1))
  [ "$(left ${LIMIT:-540})" -gt 80 ] || { echo "no time left for $arm"; break; }
  cp /tmp/ar_decoder_gate.pbtxt model_repository/ar_decoder/config.pbtxt
  [ $arm = off ] && sed -i 's/key: "first_window_wait_ms" value: { string_value: "10" }/key: "first_window_wait_ms" value: { string_value: "0" }/' \
    model_repository/ar_decoder/config.pbtxt
  echo "$arm: $(grep 'first_window_wait_ms"' model_repository/ar_decoder/config.pbtxt)"
  VOXCPM_MPS=1 LEVELS=1,4,16 PA_LEVELS="1" CAMPAIGN_BUDGET_S=$(left ${LIMIT:-540}) OUT=$OUT/$n$arm \
    bash perf/gpu_campaign.sh triton | tail -1
  at $n$arm $?
  grep "^| [0-9]* | [0-9]* | \|^| concurrency \|^| c=.* | vocoder \|^| c=[0-9]* | [0-9]* |" $OUT/$n$arm/summary.md 2>/dev/null
  rm -f $OUT/$n$arm/plots.png $OUT/$n$arm/campaign.log
  [ $n = 1 ] || rm -f $OUT/$n$arm/results.tar.gz  # the device returns at most 8 files
done
rm -rf $OUT/setup
