# Run 61, device call 1: the norm-fold probe on main's library; wip/short-stack at 8a7d8f8 (query-group
# attention: GPU tests, timeline, bench) and the attend-twice timeline build.
P=/opt/torch/.venv/bin/python3
S=$PWD/build/out/session
R=$PWD/perf/results/h200-2026-12-04-run61
dx() { $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2; }
dx $S/lib_main.so.xz /tmp/lib_main.so
for v in s s_tl s_t_tl; do dx $S/lib_$v.so.xz /tmp/lib_$v.so; done
echo "== norm fold probe"
PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=/tmp/lib_main.so timeout 200 $P $R/norm_fold_probe.py $S/row_scale_probe.so \
    1408,2816,5632,11264 2>&1 | grep -v Warn | tee $OUT/norm_fold_probe.txt
mkdir -p /tmp/br && tar xJf $S/branch.tar.xz -C /tmp/br && cd /tmp/br
export PYTHONPATH=/tmp/br VOXCPM_GIT_COMMIT=$(cat $S/commit)
echo "== short_stack tests"
VOXCPM_KERNELS_LIB=/tmp/lib_s.so timeout 90 $P -m pytest -q -s -m gpu -p no:cacheprovider tests/gpu/test_short_stack_gpu.py \
    > $OUT/stack_tests.log 2>&1; echo "tests rc=$?"
grep -E "kernel -|one kernel|passed|failed|Error|assert" $OUT/stack_tests.log | head -30
for v in s_tl s_t_tl; do echo "== timeline $v"
  VOXCPM_KERNELS_LIB=/tmp/lib_$v.so timeout 30 $P perf/short_stack_timeline.py --out $OUT/tl_$v 2>&1 | grep -v Warn; done
echo "== bench"
VOXCPM_KERNELS_LIB=/tmp/lib_s.so timeout 60 $P perf/bench_short_stack.py --out $OUT/bench_s 2>&1 | grep -v Warn | tail -8
