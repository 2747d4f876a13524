# Run 92, call 4, on call 3's warm machine (its campaign setup is kept): Nano-vLLM-VoxCPM at the
# served table's levels, then the official pipeline (one request at a time) at 1, 4 and 16 streams,
# same checkpoint, texts and forced length as call 3's served stack.
# Run as `LIMIT=S bash call4.sh`, S the seconds the call may run.
# carry: as call 3.
set -u
source perf/device_call_env.sh
unset PYTHONPATH VOXCPM_KERNELS_LIB
LEVELS=1,4,16,64,256 CAMPAIGN_BUDGET_S=$(( ${LIMIT:-560} - 15 )) OUT=$OUT/peers \
  bash perf/gpu_campaign.sh nano reference | tail -1
at peers $?
sed -n '/^| /p' $OUT/peers/summary.md 2>/dev/null | head -30
rm -f $OUT/peers/plots.png
