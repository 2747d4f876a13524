# Where the one-stream step goes now (torch profiler, graph replay and kernels launched eagerly), with 64 and 256 streams beside it.
set -x
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
export PYTHONPATH=$PWD VOXCPM_GIT_COMMIT=$(cat build/out/session/commit)
timeout 200 $P perf/profile_step.py --out $OUT --modes graph_ops --batches 1,64,256 --profile-batches 1 --budget-s 180 \
    > $OUT/profile_step.log 2>&1; echo "rc=$?"
cat $OUT/profile_step.md
