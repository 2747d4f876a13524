# Run 63, device call 7: the normed gate_up kernel with the tile's loads issued together and the
# sums split (no long chain of dependent multiply-adds): the kernel's time only.
P=/opt/torch/.venv/bin/python3
export PYTHONPATH=$PWD
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_gu4.so.xz /tmp/lib_gu4.so
VOXCPM_KERNELS_LIB=/tmp/lib_gu4.so timeout 60 $P perf/results/h200-2026-12-04-run63/gate_up_norm_diag.py split_sums 2>&1 | grep "^|" | tee $OUT/diag.md
