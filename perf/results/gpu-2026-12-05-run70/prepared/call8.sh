# After call 7 on an H100 (run 74): the 20 vocoder tests main's tier did not reach in 300 s and
# the edge-input tests (a misaligned decode_attention workspace is new since), then
# the GPU tests of what the patches change, in build/out/session/trees/both (both patches;
# decode_attention_wide.patch's test parametrisation fixed): decode_attention, the folded LocDiT
# layer, the engine and the graph runner. Sized for ~350 s of device time left.
# carry: ["build/out/session"]
set -u
source perf/device_call_env.sh
mkdir -p /tmp/r73c8
timeout 90 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_vocoder_fast_layers_gpu.py tests/gpu/test_vocoder_gpu.py tests/gpu/test_ops_edge_inputs_gpu.py \
  > /tmp/r73c8/main_vocoder.log 2>&1; at "main vocoder tests" $?; tail -1 /tmp/r73c8/main_vocoder.log
B=$PWD/build/out/session/trees/both
BL=$B/build/out/lib/libvoxcpm_kernels.so
mkdir -p $B/build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_w8.so.xz $BL
(cd $B && PYTHONPATH=$B VOXCPM_KERNELS_LIB=$BL timeout $(left 280) $P -m pytest -q -p no:cacheprovider -m gpu \
  tests/gpu/test_decode_attention_gpu.py tests/gpu/test_folded_norms_gpu.py tests/gpu/test_engine_gpu.py \
  tests/gpu/test_graph_runner.py > /tmp/r73c8/both_tier.log 2>&1); at "both tier" $?; tail -3 /tmp/r73c8/both_tier.log
cd /tmp && tar czf $OUT/r73c8.tgz r73c8
