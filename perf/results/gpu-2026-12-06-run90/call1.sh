# Run 90, call 1. On an H200: issue 5's step figures with main after runs 86 and 89 (no H200 has run
# since run 81). On any GPU: the served campaign's setup, then (where the time allows, i.e. not after
# the profile) the served stack at run 47's levels, the first served figures since run 47.
# call2.sh does the rest: `triton` after an H200's profile, `nano` on any other GPU (Nano-vLLM-VoxCPM
# on the same card; run 1's figures are the H200's).
# First, on the CPU machine: VOXCPM_CUDA_ARCHS=90 bash build/build_kernels.sh DIR for main, xz into
# build/out/session/lib.so.xz; git rev-parse HEAD > build/out/session/commit; bash build/device_bundle.sh.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/device"]
set -u
source perf/device_call_env.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  VOXCPM_LT_CACHE=/tmp/r90_lt.json timeout 200 $P perf/profile_step.py --out $OUT/step --batches 1,64,256 \
    --modes graph_ops --profile-batches 64 > $OUT/step.log 2>&1; at step $?
  cat $OUT/step/profile_step.md 2>/dev/null || tail -20 $OUT/step.log
fi
unset PYTHONPATH VOXCPM_KERNELS_LIB  # the campaign sets up its own venv and finds build/out/lib
rm -f build/out/lt_cache.json
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; at setup $?
if [ "$(left 590)" -ge 450 ]; then
  LEVELS=1,4,16,64,256 CAMPAIGN_BUDGET_S=440 OUT=$OUT/served bash perf/gpu_campaign.sh triton | tail -1
  at served $?
  sed -n '/^| /p' $OUT/served/summary.md 2>/dev/null | head -30
fi
