# Run 91, call 2. On an H200 first: run 90's call 4 (issue 5's step figures). Then, on any GPU: the
# model processes with one torch thread each (branch wip/torch-threads) against main's configs, which
# leave torch a pool of one thread per core. Call 1's py-spy recordings at 256 streams found the
# vocoder spending ~16 ms a call on line 284 of vocoder.py, a finiteness check of ~200K floats on
# the CPU, which one thread does in well under 1 ms. Arms t1 (this tree) and main (the
# torch_threads lines removed from the three GPU configs), t1 main t1 main, each a server at 64 and
# 256 streams; the first t1 arm is recorded with py-spy.
# Run as `LIMIT=S bash call2.sh`, S the seconds the call may run.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/session/py-spy.xz",
#         "build/out/device"]
set -u
source perf/device_call_env.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  VOXCPM_LT_CACHE=/tmp/r91_lt.json timeout 200 $P perf/profile_step.py --out $OUT/step --batches 1,64,256 \
    --modes graph_ops --profile-batches 64 > $OUT/step.log 2>&1; at step $?
  cat $OUT/step/profile_step.md 2>/dev/null || tail -20 $OUT/step.log
  rm -f $OUT/step/profile_step.json  # the device returns at most 8 files
fi
unpack_lib build/out/session/py-spy.xz /tmp/py-spy && chmod +x /tmp/py-spy
unset PYTHONPATH VOXCPM_KERNELS_LIB
rm -f build/out/lt_cache.json
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; at setup $?
cp -r model_repository /tmp/repo_t1
n=0
for arm in t1 main t1 main; do
  n=$((n + 1))
  [ "$(left ${LIMIT:-540})" -gt 100 ] || { echo "no time left for $arm"; break; }
  rm -rf model_repository && cp -r /tmp/repo_t1 model_repository
  [ $arm = main ] && sed -i '/key: "torch_threads"/d' model_repository/*/config.pbtxt
  echo "$arm: $(grep -c 'key: "torch_threads"' model_repository/*/config.pbtxt | tr '\n' ' ')"
  spy=""; [ $n = 1 ] && spy=/tmp/py-spy
  rm -rf build/out/campaign/results/pyspy
  PYSPY=$spy LEVELS=64,256 PA_LEVELS=" " CAMPAIGN_BUDGET_S=$(left ${LIMIT:-540}) OUT=$OUT/$n$arm \
    bash perf/gpu_campaign.sh triton | tail -1
  at $n$arm $?
  grep "^| 64 \|^| 256 \|^| c=.* | vocoder \|^| c=.* | ar_decoder " $OUT/$n$arm/summary.md 2>/dev/null
  if [ -n "$spy" ]; then
    build/out/venv/bin/python -m perf.pyspy_summary build/out/campaign/results/pyspy/vocoder.txt --top 8 \
      > $OUT/pyspy_vocoder_t1.md 2>&1
    head -20 $OUT/pyspy_vocoder_t1.md
  fi
  rm -f $OUT/$n$arm/plots.png $OUT/$n$arm/campaign.log
  [ $n = 1 ] || rm -f $OUT/$n$arm/results.tar.gz  # the device returns at most 8 files
done
rm -rf $OUT/setup
