# Run 70, device call 3 (prepared, not run): the served stack under CUDA MPS, the decoder at its
# config's below-normal MPS priority, with the engine's launch-ahead off (the default) and on
# (VOXCPM_LAUNCH_AHEAD=1). Run 30 kept launch-ahead opt-in because, without MPS, a decoder that never
# idles between steps left the time-sliced vocoder less of the GPU (-16% audio s/s at 64 streams).
# Under MPS the two processes' kernels run side by side and a due vocoder window goes first (run 69),
# so the question is whether launch-ahead now pays served, as it does in-process (13.66 -> 13.28 ms
# a step at 64 streams, run 70 call 1). Needs no patch.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/device"] (main's library,
# sm_90; the whole session folder with its trees would pass the 64 MiB a call carries).
set -u
source perf/device_call_env.sh
unset PYTHONPATH VOXCPM_KERNELS_LIB  # the campaign sets up its own venv and library path
rm -f build/out/lt_cache.json
export VOXCPM_MPS=1
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; echo "setup rc=$? at $(( $(date +%s) - T0 )) s"
for v in off on; do
  if [ $v = on ]; then export VOXCPM_LAUNCH_AHEAD=1; else unset VOXCPM_LAUNCH_AHEAD; fi
  LEVELS=1,16,64 MIN_REQUESTS=32 PA_LEVELS="1 16" CAMPAIGN_BUDGET_S=170 OUT=$OUT/$v bash perf/gpu_campaign.sh triton | tail -1
  echo "$v done at $(( $(date +%s) - T0 )) s"
  rm -f $OUT/$v/plots.png
done
for v in off on; do echo "== launch-ahead $v"; sed -n '/^| /p' $OUT/$v/summary.md | grep -v "text_encoder\|voxcpm " | head -24; done
