# wip/short-stack: when attention's rows land; one slot in flight against three.
P=/opt/torch/.venv/bin/python3
for v in e_tl e1_tl; do $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_$v.so.xz /tmp/lib_$v.so; done
export PYTHONPATH=$PWD
for v in e e1; do echo "== $v"; VOXCPM_KERNELS_LIB=/tmp/lib_${v}_tl.so timeout 30 $P perf/short_stack_timeline.py --out $OUT/tl_$v 2>&1 | grep -v Warn; done
