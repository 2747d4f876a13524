# Run 62, device call 7: the rest of the GPU tier (every file but the vocoder's and snake's, and those
# calls 5 ran) with C ABI 6 and the folded norms.
P=/opt/torch/.venv/bin/python3
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_fold.so.xz /tmp/lib_fold.so
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=/tmp/lib_fold.so
timeout 170 $P -m pytest -q -p no:cacheprovider -m gpu --durations=5 tests/gpu/test_decode_attention_gpu.py \
    tests/gpu/test_fp8_gpu.py tests/gpu/test_graph_capture_gc.py tests/gpu/test_lt_gemm_gpu.py \
    tests/gpu/test_normed_layers_gpu.py tests/gpu/test_ops_cuda_graph.py tests/gpu/test_ops_parity.py \
    tests/gpu/test_skinny_gemm_gpu.py > $OUT/pytest_rest.log 2>&1
echo "rc=$?"; tail -12 $OUT/pytest_rest.log; grep -h "FAILED\|ERROR" $OUT/pytest_rest.log | head
