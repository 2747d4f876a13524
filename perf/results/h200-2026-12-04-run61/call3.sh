# Run 61, device call 3: the short_attention row-scale tests after the reference's rounding fix; where
# the 256-stream step goes with and without the fold (torch profiler); the step A/B of main (c833e36,
# its own tree and library), the normed path and the folded one at 64, 256 and 512 streams.
P=/opt/torch/.venv/bin/python3
S=$PWD/build/out/session
R=/tmp/res; mkdir -p $R /tmp/base
dx() { $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $1 $2; }
dx $S/lib_fold.so.xz /tmp/lib_fold.so; dx $S/lib_main.so.xz /tmp/lib_main.so
tar xJf $S/base.tar.xz -C /tmp/base
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=/tmp/lib_fold.so
timeout 100 $P -m pytest -q -s -p no:cacheprovider -m gpu tests/gpu/test_folded_norms_gpu.py \
    tests/gpu/test_short_attention_gpu.py > $R/gpu_tests.log 2>&1
echo "tests rc=$?"; grep -E "normed - fp32|passed|failed|Error" $R/gpu_tests.log | tail -6
for v in 0 1; do
  VOXCPM_FOLDED_NORMS=$v timeout 100 $P perf/profile_step.py --out $R/prof_$v --modes graph_ops --batches 256 \
      --profile-batches 256 > $R/prof_$v.log 2>&1; echo "profile $v rc=$?"
  head -28 $R/prof_$v/profile_ops.txt | cut -c1-150
done
timeout 420 $P perf/ab_step.py --out $R/ab --variant main@/tmp/base=VOXCPM_KERNELS_LIB=/tmp/lib_main.so \
    --variant normed=VOXCPM_FOLDED_NORMS=0 --variant folded --batches 64,256,512 --repeats 2 --no-throwaway \
    --run-timeout-s 100 2>&1 | grep -v Warn | tail -12
cd $R && tar czf $OUT/run61_call3.tgz . && cp ab/ab_step.md $OUT/ 2>/dev/null
