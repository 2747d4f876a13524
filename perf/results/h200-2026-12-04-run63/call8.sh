# Run 63, device call 8: the LocDiT's time per step against the number of streams (dit_scaling_probe.py), main's library.
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
timeout 400 $P perf/results/h200-2026-12-04-run63/dit_scaling_probe.py 2>&1 | grep -v Warn | tee $OUT/dit_scaling.txt | tail -14
