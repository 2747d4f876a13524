# Run 90, call 6. On an H200: call 4's profile (issue 5's step figures). On any other GPU: does the
# ar_decoder's max_batch_size (8) hold back a burst's first audio? At a 256-stream burst on an H100
# (call 1) each ar_decoder execution took ~8.7 ms for ~7.3 requests and requests waited 92 ms in its
# queue, while the first audio was 365.5 ms (0.50x Nano-vLLM-VoxCPM's: issue 6's limit). Arm b64
# serves the same repository with the ar_decoder's max_batch_size at 64, then arm b8 as committed,
# each one burst of 256 streams on the same machine (b8 second, so that if the budget ends first
# the comparison falls back to call 1's figures).
# Run as `LIMIT=S bash call6.sh`, S the seconds the call may run (the campaign's budget is cut to it).
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/device"]
set -u
source perf/device_call_env.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  VOXCPM_LT_CACHE=/tmp/r90_lt.json timeout 200 $P perf/profile_step.py --out $OUT/step --batches 1,64,256 \
    --modes graph_ops --profile-batches 64 > $OUT/step.log 2>&1; at step $?
  cat $OUT/step/profile_step.md 2>/dev/null || tail -20 $OUT/step.log
  exit 0
fi
unset PYTHONPATH VOXCPM_KERNELS_LIB
rm -f build/out/lt_cache.json
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; at setup $?
for arm in b64 b8; do
  if [ $arm = b64 ]; then
    sed -i 's/^max_batch_size: 8$/max_batch_size: 64/' model_repository/ar_decoder/config.pbtxt
  else
    sed -i 's/^max_batch_size: 64$/max_batch_size: 8/' model_repository/ar_decoder/config.pbtxt
  fi
  grep '^max_batch_size' model_repository/ar_decoder/config.pbtxt
  LEVELS=256 PA_LEVELS=" " CAMPAIGN_BUDGET_S=$(left ${LIMIT:-250}) OUT=$OUT/$arm bash perf/gpu_campaign.sh triton | tail -1
  at $arm $?
  grep '^| 256 \|^| c=256 ' $OUT/$arm/summary.md 2>/dev/null | grep -v 'text_encoder\|voxcpm'
done
