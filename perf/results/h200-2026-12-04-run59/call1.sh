# wip/short-stack: the kernel stage by stage, its GPU tests, the stack bench, then the step A/B at 1-4 streams.
set -x
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_stack.so.xz build/out/lib/libvoxcpm_kernels.so
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so VOXCPM_GIT_COMMIT=$(cat build/out/session/commit)
timeout 60 $P build/out/session/debug_stack.py 2>&1 | grep -v Warn | tee $OUT/debug.log; echo "debug rc=${PIPESTATUS[0]}"
grep -q "error 0" $OUT/debug.log || exit 1
timeout 150 $P -m pytest -q -s -m gpu -p no:cacheprovider tests/gpu/test_short_stack_gpu.py > $OUT/stack_tests.log 2>&1; echo "tests rc=$?"
grep -E "kernel -|one kernel|passed|failed|Error|assert" $OUT/stack_tests.log | head -30
timeout 90 $P perf/bench_short_stack.py --out $OUT 2>&1 | grep -v Warn | tail -6
timeout 200 $P perf/ab_step.py --out /tmp/ab --variant off=VOXCPM_SHORT_STACK=0 --variant on=VOXCPM_SHORT_STACK=1 \
    --batches 1,2,4 --repeats 2 --no-throwaway --run-timeout-s 45 > $OUT/ab.log 2>&1; echo "ab rc=$?"
cat /tmp/ab/ab_step.md
tar czf $OUT/ab.tgz -C /tmp ab
