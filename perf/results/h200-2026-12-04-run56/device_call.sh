# wip/time-token-cache (this tree) against main (base_tree.tgz), same library: graph tests, then the step at 1-16 streams, interleaved.
set -x
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib /tmp/base
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
tar xzf build/out/session/base_tree.tgz -C /tmp/base
LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
export PYTHONPATH=$PWD VOXCPM_GIT_COMMIT=$(cat build/out/session/commit)
VOXCPM_KERNELS_LIB=$LIB timeout 100 $P -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_graph_runner.py \
    > $OUT/gpu_tests.log 2>&1; echo "rc=$?"; tail -3 $OUT/gpu_tests.log
timeout 260 $P perf/ab_step.py --out /tmp/ab --variant base@/tmp/base=VOXCPM_KERNELS_LIB=$LIB \
    --variant cache=VOXCPM_KERNELS_LIB=$LIB --batches 1,4,16 --repeats 2 --no-throwaway --run-timeout-s 55
cat /tmp/ab/ab_step.md
tar czf $OUT/ab_cache.tgz -C /tmp ab
