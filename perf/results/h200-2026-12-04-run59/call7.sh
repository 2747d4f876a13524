# wip/short-stack: the hang of call 6, through the watchdog build.
P=/opt/torch/.venv/bin/python3
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_w.so.xz /tmp/lib_w.so
export PYTHONPATH=$PWD
VOXCPM_KERNELS_LIB=/tmp/lib_w.so timeout 60 $P build/out/session/watch.py 2>&1 | grep -v Warn
