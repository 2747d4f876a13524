# Run 61, device call 2: the folded norms (working tree on main + the library built from it): GPU tests
# of the ops and of the stack, then the step A/B against VOXCPM_FOLDED_NORMS=0 at 64 and 256 streams.
P=/opt/torch/.venv/bin/python3
S=$PWD/build/out/session
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $S/lib_fold.so.xz /tmp/lib_fold.so
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=/tmp/lib_fold.so
timeout 200 $P -m pytest -q -s -p no:cacheprovider -m gpu tests/gpu/test_folded_norms_gpu.py \
    tests/gpu/test_short_attention_gpu.py tests/gpu/test_gate_up_sm90_gpu.py > $OUT/gpu_tests.log 2>&1
echo "tests rc=$?"; grep -E "normed - fp32|passed|failed|Error" $OUT/gpu_tests.log | tail -15
timeout 330 $P perf/ab_step.py --out $OUT/ab --variant normed=VOXCPM_FOLDED_NORMS=0 --variant folded \
    --batches 64,256 --repeats 2 --no-throwaway --run-timeout-s 75 2>&1 | grep -v Warn | tail -12
