# Run 92, call 2. On an H200: call 1's H200 branch (issue 5's step figures, then the served stack).
# On any other GPU: the GPU tier's tritonserver file (the committed GPU configs, the first-window gate
# on since run 91, which no GPU test run has had yet) with the campaign's venv, which holds
# tritonclient over the image's CUDA torch.
# Run as `LIMIT=S bash call2.sh`, S the seconds the call may run.
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/device"]
set -u
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash perf/results/gpu-2026-12-06-run92/call1.sh
  exit 0
fi
source perf/device_call_env.sh
unset PYTHONPATH
rm -f build/out/lt_cache.json
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; at setup $?
timeout $(left ${LIMIT:-300}) build/out/venv/bin/python -m pytest -q -p no:cacheprovider -m gpu -rfs \
  tests/gpu/test_triton_gpu.py > $OUT/triton_gpu.log 2>&1; at tests $?
tail -15 $OUT/triton_gpu.log
rm -rf $OUT/setup
