# Run 61, device call 5: short_attention's scaled kernel with the scales loaded alongside the rows and
# the keys' scales staged in shared memory; the GPU op tests; the served stack's GPU tests (tier 3,
# including the vanished-client slot return of run 60 on the GPU); the step A/B normed vs folded; the
# engine's GPU tests with whatever time is left.
P=/opt/torch/.venv/bin/python3
START=$(date +%s)
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_fold.so.xz build/out/lib/libvoxcpm_kernels.so
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
R=/tmp/res; mkdir -p $R
timeout 60 $P -m pytest -q -s -p no:cacheprovider -m gpu tests/gpu/test_folded_norms_gpu.py \
    tests/gpu/test_short_attention_gpu.py tests/gpu/test_gate_up_sm90_gpu.py > $R/gpu_tests.log 2>&1
echo "op tests rc=$?"; grep -E "normed - fp32|passed|failed|Error" $R/gpu_tests.log | tail -4
OUT=/tmp/campaign timeout 80 bash perf/gpu_campaign.sh setup > $R/setup.log 2>&1; echo "setup rc=$?"
timeout 110 build/out/venv/bin/python -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_triton_gpu.py \
    > $R/pytest_triton.log 2>&1; echo "triton tests rc=$?"; tail -3 $R/pytest_triton.log
timeout 230 $P perf/ab_step.py --out $R/ab --variant normed=VOXCPM_FOLDED_NORMS=0 --variant folded \
    --batches 64,256,512 --repeats 2 --no-throwaway --run-timeout-s 60 2>&1 | grep -v Warn | tail -6
LEFT=$((540 - $(date +%s) + START)); echo "engine tests get ${LEFT}s"
[ $LEFT -gt 30 ] && timeout $LEFT $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_engine_gpu.py \
    tests/gpu/test_graph_runner.py > $R/pytest_engine.log 2>&1; echo "engine tests rc=$?"; tail -2 $R/pytest_engine.log
cd $R && tar czf $OUT/run61_call5.tgz . && cp ab/ab_step.md $OUT/ 2>/dev/null
