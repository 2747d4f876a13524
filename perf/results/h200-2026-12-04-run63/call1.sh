# Run 63, device call 1: short_attention computing the folded norm's row statistic itself (no row_scale
# kernel before it); its GPU tests; the step A/B against main (its own tree and library); the cuBLASLt
# heuristic asked for 64 candidates instead of 16 on the 64- and 256-stream shapes.
P=/opt/torch/.venv/bin/python3
START=$(date +%s)
unxz() { $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$1" "$2"; }
mkdir -p build/out/lib /tmp/base
unxz build/out/session/lib_new.so.xz build/out/lib/libvoxcpm_kernels.so
unxz build/out/session/lib_main.so.xz /tmp/lib_main.so
$P -c "import lzma,tarfile; tarfile.open(fileobj=lzma.open('build/out/session/base_tree.tar.xz')).extractall('/tmp/base')"
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
R=/tmp/res; mkdir -p $R
timeout 90 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_folded_norms_gpu.py \
    tests/gpu/test_short_attention_gpu.py > $R/gpu_tests.log 2>&1
echo "op tests rc=$?"; grep -E "passed|failed|Error" $R/gpu_tests.log | tail -4
timeout 60 $P perf/lt_gemm_sweep.py --streams 64,256 --candidates 64 --out $R/sweep64.md > $R/sweep64.log 2>&1
echo "sweep rc=$?"; cat $R/sweep64.md
timeout 240 $P perf/ab_step.py --out $R/ab --variant main@/tmp/base=VOXCPM_KERNELS_LIB=/tmp/lib_main.so \
    --variant fused --batches 64,256 --repeats 2 --no-throwaway --run-timeout-s 60 2>&1 | grep -v Warn | tail -8
LEFT=$((560 - $(date +%s) + START)); echo "left ${LEFT}s"
[ $LEFT -gt 60 ] && timeout $LEFT $P perf/profile_step.py --modes graph_ops --batches 64 --profile-batches 64 \
    --out $R/prof > $R/prof.log 2>&1; echo "profile rc=$?"
cd $R && tar czf $OUT/run63_call1.tgz . && cp ab/ab_step.md $OUT/ 2>/dev/null
