# Run 129: whatever card comes. On an H200: run 126's call 2 (issue 5's H200 figures: main against
# prev, 1 and 64 streams, then 256). On any other card: the GPU tests run 128 did not reach before
# its 300 s limit (it stopped in skinny_gemm's, at 78%), from skinny_gemm's file to the last.
# carry: ["build/out/session/lib.so.xz", "build/out/session/lib_prev.so.xz", "build/out/session/commit"]
set -u; LIMIT=${LIMIT:-540}
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  LIMIT=$LIMIT bash perf/results/gpu-2026-12-07-run126/call2.sh
else
  source perf/device_call_env.sh
  timeout $(left $LIMIT) $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_skinny_gemm_gpu.py \
    tests/gpu/test_snake_depthwise_conv_gpu.py tests/gpu/test_snake_gpu.py tests/gpu/test_step_state_gpu.py \
    tests/gpu/test_triton_gpu.py tests/gpu/test_vocoder_fast_layers_gpu.py tests/gpu/test_vocoder_gpu.py \
    > $OUT/tests_rest.log 2>&1; at tests_rest $?
  tail -4 $OUT/tests_rest.log
fi
