# Run 63, device call 5: the normed gate_up kernel with its factors applied in the epilogue (left in
# shared memory by the mainloop, no wait for the last wgmma); GPU tests, the kernel's time, the step
# A/B against main (its own tree and library), a profile at 64 streams.
P=/opt/torch/.venv/bin/python3
START=$(date +%s)
unxz() { $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$1" "$2"; }
mkdir -p build/out/lib /tmp/base
unxz build/out/session/lib_gu2.so.xz build/out/lib/libvoxcpm_kernels.so
unxz build/out/session/lib_main.so.xz /tmp/lib_main.so
$P -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('build/out/session/base_tree.tar.xz')).extractall('/tmp/base')"
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
R=/tmp/res; mkdir -p $R
timeout 90 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_folded_norms_gpu.py \
    tests/gpu/test_gate_up_sm90_gpu.py > $R/gpu_tests.log 2>&1
echo "op tests rc=$?"; grep -E "passed|failed|Error" $R/gpu_tests.log | tail -4
timeout 60 $P perf/results/h200-2026-12-04-run63/gate_up_norm_diag.py epilogue_factors 2>&1 | grep "^|" | tee $R/diag.md
timeout 250 $P perf/ab_step.py --out $R/ab --variant main@/tmp/base=VOXCPM_KERNELS_LIB=/tmp/lib_main.so \
    --variant gate_up_norm --batches 64,256,512 --repeats 2 --no-throwaway --run-timeout-s 60 2>&1 | grep -v Warn | tail -8
LEFT=$((560 - $(date +%s) + START)); echo "left ${LEFT}s"
[ $LEFT -gt 60 ] && timeout $LEFT $P perf/profile_step.py --modes graph_ops --batches 64,256 --profile-batches 64 \
    --out $R/prof > $R/prof.log 2>&1; echo "profile rc=$?"
cd $R && tar czf $OUT/run63_call5.tgz . && cp ab/ab_step.md $OUT/ 2>/dev/null
