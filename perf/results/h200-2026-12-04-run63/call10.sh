# Run 63, device call 10: the GPU tier (all files but the vocoder's, snake's and the served stack's)
# after minicpm.py's split into attention.py, mlp.py, rms_norm.py and rope.py; main's library.
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
FILES=$(ls tests/gpu/test_*.py | grep -v -e vocoder -e snake -e triton)
timeout 420 $P -m pytest -q -p no:cacheprovider -m gpu $FILES > $OUT/gpu_tier.log 2>&1
echo "rc=$?"; tail -3 $OUT/gpu_tier.log
