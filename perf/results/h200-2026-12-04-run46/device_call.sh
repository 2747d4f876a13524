set -x
P=/opt/torch/.venv/bin/python3
dec() { $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" "$1" "$2"; }
dec build/out/session/lib_main.so.xz /tmp/main.so
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=/tmp/main.so
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv
timeout 290 $P -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_engine_gpu.py tests/gpu/test_vocoder_gpu.py \
    > $OUT/gpu_tests.log 2>&1
tail -15 $OUT/gpu_tests.log
timeout 190 $P perf/profile_step.py --out /tmp/prof --modes graph_ops --batches 64,256,512 --profile-batches 64 \
    --budget-s 150 > $OUT/profile.log 2>&1
tail -12 $OUT/profile.log
tar czf $OUT/prof.tgz -C /tmp prof
