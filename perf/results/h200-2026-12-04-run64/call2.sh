# Run 64, device call 2: lt_search's walk inside lt_gemm's tuning. GPU tests, what a 0.5 s walk
# finds per shape, and the step A/B against the heuristic's list alone (VOXCPM_LT_SEARCH_S=0).
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
timeout 240 $P -m pytest -q -m gpu tests/gpu/test_lt_search_gpu.py tests/gpu/test_lt_gemm_gpu.py \
  tests/gpu/test_graph_runner.py tests/gpu/test_engine_gpu.py 2>&1 | tail -4 | tee $OUT/gpu_tests.log
[ -n "$(grep -E ' passed' $OUT/gpu_tests.log)" ] || exit 1
timeout 150 $P -m perf.lt_config_search --streams 64 --budget-s 0.5 --out $OUT/walk_0.5s.md 2>&1 | grep -v Warn | tail -9
timeout 400 $P perf/ab_step.py --out /tmp/ab --variant heuristic=VOXCPM_LT_SEARCH_S=0 --variant walk \
  --batches 16,64,256 --repeats 2 --no-throwaway --run-timeout-s 90 2>&1 | grep -v Warn | tail -12
cp /tmp/ab/ab_step.md $OUT/ab_step.md
cd /tmp && tar czf $OUT/ab.tgz ab
