# wip/short-stack: the producer backing off paused while its block runs attention (p), against not (g).
P=/opt/torch/.venv/bin/python3
for v in g_tl p_tl; do $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_$v.so.xz /tmp/lib_$v.so; done
export PYTHONPATH=$PWD
for v in p g; do echo "== $v"; VOXCPM_KERNELS_LIB=/tmp/lib_${v}_tl.so timeout 30 $P perf/short_stack_timeline.py --out $OUT/tl_$v 2>&1 | grep -v Warn; done
