# Run 91, call 1. On an H200 first: run 90's call 4 (issue 5's step figures at 1 / 64 / 256 streams
# after runs 86 and 89). Then, on any GPU: where the served stack's Python processes spend a
# 256-stream burst, and a 64-stream one if time is left. At 256 streams (run 90) ar_decoder's requests
# waited 35-92 ms in its queue, each execution took ~1.2 ms a request, and the vocoder's calls took
# ~137 ms for ~60 windows that take ~20 ms in-process: GIL contention was the guess. py-spy records
# each model's stub and the load client (perf/gpu_campaign.sh PYSPY), perf/pyspy_summary.py tallies.
# Run as `LIMIT=S bash call1.sh`, S the seconds the call may run.
# py-spy.xz: the py-spy 0.4.3 binary from its manylinux wheel, stripped, xz -9e (the carry limit).
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/session/py-spy.xz",
#         "build/out/device"]
set -u
source perf/device_call_env.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  VOXCPM_LT_CACHE=/tmp/r91_lt.json timeout 200 $P perf/profile_step.py --out $OUT/step --batches 1,64,256 \
    --modes graph_ops --profile-batches 64 > $OUT/step.log 2>&1; at step $?
  cat $OUT/step/profile_step.md 2>/dev/null || tail -20 $OUT/step.log
fi
unpack_lib build/out/session/py-spy.xz /tmp/py-spy && chmod +x /tmp/py-spy && /tmp/py-spy --version
unset PYTHONPATH VOXCPM_KERNELS_LIB
rm -f build/out/lt_cache.json
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; at setup $?
for level in 256 64; do
  [ "$(left ${LIMIT:-400})" -gt 130 ] || { echo "no time left for $level"; break; }
  rm -rf build/out/campaign/results/pyspy
  PYSPY=/tmp/py-spy LEVELS=$level PA_LEVELS=" " CAMPAIGN_BUDGET_S=$(left ${LIMIT:-400}) OUT=$OUT/c$level \
    bash perf/gpu_campaign.sh triton | tail -1
  at c$level $?
  grep "^| $level \|^| c=$level " $OUT/c$level/summary.md 2>/dev/null
  build/out/venv/bin/python -m perf.pyspy_summary build/out/campaign/results/pyspy/*.txt --rate 250 \
    --seconds "$(cat build/out/campaign/results/pyspy/seconds)" > $OUT/pyspy_c$level.md 2>&1
  grep -A3 "^## \|samples, " $OUT/pyspy_c$level.md | grep "samples, \|^## " 
done
