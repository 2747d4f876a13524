# Run 63, device call 9: bench_ops' row_scale case (added in stop 24, not yet run on a GPU) against its
# reference and add_rmsnorm at the LocDiT's row counts, main's library.
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
timeout 300 $P perf/bench_ops.py --out $OUT/bench_row_scale.json --ops row_scale,add_rmsnorm --no-compile 2>&1 | grep -v Warn | tee $OUT/bench_row_scale.log | tail -30
