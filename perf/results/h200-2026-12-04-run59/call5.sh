# wip/short-stack: slots in flight per producer 2 / 3 / 5 (timeline), tests and bench at 3.
set -x
P=/opt/torch/.venv/bin/python3
for v in f2_tl f3_tl f5_tl f3; do $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_$v.so.xz /tmp/lib_$v.so; done
export PYTHONPATH=$PWD VOXCPM_GIT_COMMIT=$(cat build/out/session/commit)
VOXCPM_KERNELS_LIB=/tmp/lib_f3.so timeout 150 $P -m pytest -q -s -m gpu -p no:cacheprovider tests/gpu/test_short_stack_gpu.py > $OUT/stack_tests.log 2>&1; echo "tests rc=$?"
grep -E "passed|failed|Error" $OUT/stack_tests.log | head -5
for v in f2 f3 f5; do echo "== $v"; VOXCPM_KERNELS_LIB=/tmp/lib_${v}_tl.so timeout 60 $P perf/short_stack_timeline.py --out $OUT/tl_$v 2>&1 | grep -v Warn; done
VOXCPM_KERNELS_LIB=/tmp/lib_f3.so timeout 90 $P perf/bench_short_stack.py --out $OUT/bench_f3 2>&1 | grep -v Warn | tail -5
