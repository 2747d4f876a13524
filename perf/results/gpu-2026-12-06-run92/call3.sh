# Run 92, call 3. On an H200: call 1's H200 branch (issue 5's step figures, then the served stack).
# On any other GPU: README's served table again, now with the first-window gate (run 91) and the
# step of run 89: the served stack at 1-256 streams without MPS, then under MPS (VOXCPM_MPS=1).
# call4.sh, on the same warm machine, runs Nano-vLLM-VoxCPM and the official pipeline beside it.
# Run as `LIMIT=S bash call3.sh`, S the seconds the call may run.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/device"]
set -u
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash perf/results/gpu-2026-12-06-run92/call1.sh
  exit 0
fi
source perf/device_call_env.sh
unset PYTHONPATH VOXCPM_KERNELS_LIB
rm -f build/out/lt_cache.json
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; at setup $?
for arm in plain mps; do
  mps=0; [ $arm = mps ] && mps=1
  budget=$(( $(left ${LIMIT:-580}) - 5 )); [ $arm = plain ] && budget=$(( budget / 2 + 20 ))
  VOXCPM_MPS=$mps LEVELS=1,4,16,64,256 CAMPAIGN_BUDGET_S=$budget OUT=$OUT/$arm \
    bash perf/gpu_campaign.sh triton | tail -1
  at $arm $?
  sed -n '/^| /p' $OUT/$arm/summary.md 2>/dev/null | head -8
  rm -f $OUT/$arm/plots.png $OUT/$arm/campaign.log
done
rm -rf $OUT/setup
