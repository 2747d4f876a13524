# Run 64, device call 4: lt_search's walk field by field (cluster, custom, tile, ...), shapes of
# >= 256 rows, 60 s a process at most. GPU tests, what a 0.5 s walk finds, the 64-stream step A/B.
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
timeout 90 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_lt_search_gpu.py tests/gpu/test_lt_gemm_gpu.py > $OUT/gpu_tests.log 2>&1; echo "tests rc=$?"; tail -2 $OUT/gpu_tests.log
timeout 45 $P -m perf.lt_config_search --streams 64 --budget-s 0.5 --only "dit o_proj,dit down,dit qkv" \
  --out $OUT/walk_0.5s.md 2>&1 | grep -v Warn | tail -3
timeout 200 $P perf/ab_step.py --out /tmp/ab --variant heuristic=VOXCPM_LT_SEARCH_S=0 --variant walk \
  --batches 64 --repeats 2 --no-throwaway --run-timeout-s 60 2>&1 | grep -v Warn | tail -3
cp /tmp/ab/ab_step.md $OUT/; cd /tmp && tar czf $OUT/ab.tgz ab
