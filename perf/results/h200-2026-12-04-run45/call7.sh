set -x
P=/opt/torch/.venv/bin/python3
dec() { $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$1" "$2"; }
dec build/out/session/lib_main.so.xz /tmp/main.so
dec build/out/session/lib_sa2.so.xz /tmp/sa.so
export PYTHONPATH=$PWD
VOXCPM_KERNELS_LIB=/tmp/main.so timeout 165 $P -m pytest -q -m gpu tests/gpu/test_vocoder_gpu.py \
    tests/gpu/test_vocoder_fast_layers_gpu.py tests/gpu/test_engine_gpu.py > $OUT/gpu_tests.log 2>&1
tail -5 $OUT/gpu_tests.log
timeout 115 $P perf/ab_step.py --out /tmp/ab --variant base=VOXCPM_KERNELS_LIB=/tmp/main.so \
    --variant sa=VOXCPM_KERNELS_LIB=/tmp/sa.so --batches 256 --repeats 3 --no-throwaway --run-timeout-s 40
cat /tmp/ab/ab_step.md
tar czf $OUT/ab.tgz -C /tmp ab
