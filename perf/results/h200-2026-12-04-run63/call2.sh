# Run 63, device call 2: the LocDiT of one half of the streams beside the other half's LMs on two CUDA
# streams (overlap_probe.py), main's library.
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
timeout 420 $P perf/results/h200-2026-12-04-run63/overlap_probe.py 2>&1 | grep -v Warn | tee $OUT/overlap_probe.txt | tail -20
