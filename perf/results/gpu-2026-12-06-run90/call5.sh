# Run 90, call 5, on a two-GPU machine (nvidia-h100-x2 or nvidia-h200-x2): the one-decoder-per-GPU
# deployment on real hardware for the first time. First the GPU tests that need two GPUs (an engine
# and a vocoder on the second GPU, driven from threads whose current device is the first), then the
# served stack as committed (ar_decoder and vocoder: one instance per visible GPU) at 64 and 256
# streams, to set against the one-GPU figures of calls 1-3. The summary's engine table has a line
# per decoder instance (perf/triton_metrics.py): whether Triton spread the streams over both GPUs.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/device"]
set -u
source perf/device_call_env.sh
nvidia-smi --query-gpu=index,name --format=csv,noheader
timeout 120 $P -m pytest -q -m gpu tests/gpu/test_second_device_gpu.py -p no:cacheprovider > $OUT/two_gpu_tests.log 2>&1
at two_gpu_tests $?
tail -5 $OUT/two_gpu_tests.log
unset PYTHONPATH VOXCPM_KERNELS_LIB
rm -f build/out/lt_cache.json
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; at setup $?
LEVELS=64,256 CAMPAIGN_BUDGET_S=$(left 560) OUT=$OUT/served bash perf/gpu_campaign.sh triton | tail -1
at served $?
sed -n '/^| /p' $OUT/served/summary.md 2>/dev/null | head -30
grep -h "GPU device" build/out/campaign/results/logs/tritonserver.log 2>/dev/null | head -12
