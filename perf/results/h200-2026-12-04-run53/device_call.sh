# The whole GPU tier on main (its kernels library built for sm_90), then the committed GPU configs on a real server.
set -x
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
export PYTHONPATH=$PWD VOXCPM_GIT_COMMIT=$(cat build/out/session/commit)
export VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
timeout 250 $P -m pytest -q -m gpu -p no:cacheprovider tests/gpu --ignore=tests/gpu/test_triton_gpu.py \
    -k "not vocoder and not snake" --durations=10 > $OUT/pytest_gpu_part1.log 2>&1; echo "rc=$?"; tail -3 $OUT/pytest_gpu_part1.log
timeout 170 $P -m pytest -q -m gpu -p no:cacheprovider tests/gpu --ignore=tests/gpu/test_triton_gpu.py \
    -k "vocoder or snake" --durations=10 > $OUT/pytest_gpu_part2.log 2>&1; echo "rc=$?"; tail -3 $OUT/pytest_gpu_part2.log
OUT=/tmp/campaign timeout 70 bash perf/gpu_campaign.sh setup > /tmp/setup.log 2>&1; echo "setup rc=$?"
timeout 100 build/out/venv/bin/python -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_triton_gpu.py \
    > $OUT/pytest_triton.log 2>&1; echo "rc=$?"; tail -3 $OUT/pytest_triton.log
grep -h "FAILED\|ERROR" $OUT/pytest_*.log | head -20
