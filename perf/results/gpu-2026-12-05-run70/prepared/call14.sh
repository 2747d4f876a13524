# Prepared in run 78's session: the served stack under MPS (launch-ahead on, as build/tritonserver.sh
# now sets it there) with pinned_prefill.patch against main. An admission's prefill inputs are
# pageable host tensors, and a pageable copy waits for the device queue; with launch-ahead the
# step launched ahead is still in that queue, so each admission step loses the overlap until it
# ends. Under steady load at 64 streams of 8 s (50 patches) a stream is admitted about every step,
# so the steady-load figures (perf_analyzer at 16 and 64) are where the patch should show. Runs
# main, patched, main (one campaign each, ~90 s), the patch applied in place on the device and taken
# off again. First: nothing (the patch is in the repository).
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/device"]
set -u
source perf/device_call_env.sh
unset PYTHONPATH VOXCPM_KERNELS_LIB
rm -f build/out/lt_cache.json
export VOXCPM_MPS=1
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; echo "setup rc=$? at $(( $(date +%s) - T0 )) s"
PATCH=perf/results/gpu-2026-12-05-run70/prepared/pinned_prefill.patch
for v in main1 pinned main2; do
  [ $v = pinned ] && git apply $PATCH
  LEVELS=16,64 MIN_REQUESTS=32 PA_LEVELS="16 64" CAMPAIGN_BUDGET_S=170 OUT=$OUT/$v bash perf/gpu_campaign.sh triton | tail -1
  [ $v = pinned ] && git apply -R $PATCH
  echo "$v done at $(( $(date +%s) - T0 )) s"
  rm -f $OUT/$v/plots.png
done
for v in main1 pinned main2; do echo "== $v"; sed -n '/^| /p' $OUT/$v/summary.md | grep -v "text_encoder\|voxcpm \|vocoder" | head -20; done
