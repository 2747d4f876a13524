# Run 62, device call 6: where the 64- and 256-stream steps go with the final folded path (call 5's
# library), for the per-kernel figures call 5 did not profile.
P=/opt/torch/.venv/bin/python3
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_fold.so.xz /tmp/lib_fold.so
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=/tmp/lib_fold.so
R=/tmp/res; mkdir -p $R
timeout 150 $P perf/profile_step.py --out $R/prof --modes graph_ops --batches 64,256 --profile-batches 64,256 \
    > $R/prof.log 2>&1; echo "profile rc=$?"
cat $R/prof/profile_step.md
grep -E "^###|cutlass|nvjet_sm90_tst_176|nvjet_sm90_tst_144|short_attention|row_scale|add_rmsnorm|decode_attention" \
    $R/prof/profile_ops.txt | cut -c1-58,140-230 | head -30
cd $R && tar czf $OUT/run62_call6.tgz .
