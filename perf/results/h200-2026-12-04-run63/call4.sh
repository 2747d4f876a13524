# Run 63, device call 4: the normed gate_up kernel against its two diagnostic builds (gate_up_norm_diag.py).
P=/opt/torch/.venv/bin/python3
export PYTHONPATH=$PWD
echo "| library | rows | schedule | plain us | normed us | normed vs plain |"; echo "|---|---|---|---|---|---|"
for v in gu diag1 diag2; do
    $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_$v.so.xz /tmp/lib_$v.so
    VOXCPM_KERNELS_LIB=/tmp/lib_$v.so timeout 120 $P perf/results/h200-2026-12-04-run63/gate_up_norm_diag.py $v 2>&1 | grep "^|"
done | tee $OUT/gate_up_norm_diag.md
