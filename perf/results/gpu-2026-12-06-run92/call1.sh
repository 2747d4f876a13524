# Run 92, call 1.
# On an H200: run 90's call 4 (issue 5's step figures at 1 / 64 / 256 streams, none on an H200 since
# run 81), then the served stack with the first-window gate at 1-256 streams, no MPS (README's served
# figures on the H200 are run 47's).
# On any other GPU: one torch thread per model process (run 91's torch_threads.patch) against main,
# under CUDA MPS. Run 91 call 2 measured it without MPS only: vocoder calls 4-6x cheaper, first audio
# later, because more, smaller vocoder calls each cost a context switch. Under MPS the processes'
# kernels share the GPU without switches, so the cheaper calls may pay there. Arms t1 main t1 main,
# each a server at 64 and 256 streams.
# Run as `LIMIT=S bash call1.sh`, S the seconds the call may run.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/device"]
set -u
source perf/device_call_env.sh
unset_env() { unset PYTHONPATH VOXCPM_KERNELS_LIB; rm -f build/out/lt_cache.json; }
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  VOXCPM_LT_CACHE=/tmp/r92_lt.json timeout 200 $P perf/profile_step.py --out $OUT/step --batches 1,64,256 \
    --modes graph_ops --profile-batches 64 > $OUT/step.log 2>&1; at step $?
  cat $OUT/step/profile_step.md 2>/dev/null || tail -20 $OUT/step.log
  rm -f $OUT/step/profile_step.json  # the device returns at most 8 files
  unset_env
  OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; at setup $?
  LEVELS=1,4,16,64,256 CAMPAIGN_BUDGET_S=$(( $(left ${LIMIT:-580}) - 10 )) OUT=$OUT/served \
    bash perf/gpu_campaign.sh triton | tail -1
  at served $?
  sed -n '/^| /p' $OUT/served/summary.md 2>/dev/null | head -30
  rm -rf $OUT/setup $OUT/served/plots.png $OUT/served/campaign.log
  exit 0
fi
unset_env
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; at setup $?
cp -r model_repository /tmp/repo_main
n=0
for arm in t1 main t1 main; do
  n=$((n + 1))
  [ "$(left ${LIMIT:-580})" -gt 100 ] || { echo "no time left for $arm"; break; }
  rm -rf model_repository && cp -r /tmp/repo_main model_repository
  [ $arm = t1 ] && sed -i '/key: "checkpoint"/a parameters { key: "torch_threads" value: { string_value: "1" } }' \
    model_repository/{ar_decoder,text_encoder,vocoder}/config.pbtxt
  echo "$arm: $(grep -c 'key: "torch_threads"' model_repository/*/config.pbtxt | tr '\n' ' ')"
  VOXCPM_MPS=1 LEVELS=64,256 PA_LEVELS=" " CAMPAIGN_BUDGET_S=$(left ${LIMIT:-580}) OUT=$OUT/$n$arm \
    bash perf/gpu_campaign.sh triton | tail -1
  at $n$arm $?
  grep "^| 64 \|^| 256 \|^| c=.* | vocoder \|^| c=.* | ar_decoder " $OUT/$n$arm/summary.md 2>/dev/null
  rm -f $OUT/$n$arm/plots.png $OUT/$n$arm/campaign.log $OUT/$n$arm/results.tar.gz
done
rm -rf $OUT/setup
