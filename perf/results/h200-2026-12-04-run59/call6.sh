# wip/short-stack: vectorised attention loads (tests), the stage timeline, the stack bench.
set -x
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
for v in d d_tl; do $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_$v.so.xz /tmp/lib_$v.so; done
export PYTHONPATH=$PWD VOXCPM_GIT_COMMIT=$(cat build/out/session/commit)
VOXCPM_KERNELS_LIB=/tmp/lib_d.so timeout 60 $P -m pytest -q -s -m gpu -p no:cacheprovider tests/gpu/test_short_stack_gpu.py > $OUT/stack_tests.log 2>&1; echo "tests rc=$?"
grep -E "kernel -|one kernel|passed|failed|Error|assert" $OUT/stack_tests.log | head -30
VOXCPM_KERNELS_LIB=/tmp/lib_d_tl.so timeout 30 $P perf/short_stack_timeline.py --out $OUT/tl_d 2>&1 | grep -v Warn
VOXCPM_KERNELS_LIB=/tmp/lib_d.so timeout 60 $P perf/bench_short_stack.py --out $OUT/bench_d 2>&1 | grep -v Warn | tail -5
