set -x
P=/opt/torch/.venv/bin/python3
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz /tmp/lib.so
export VOXCPM_KERNELS_LIB=/tmp/lib.so
mkdir -p $OUT/voc $OUT/head /tmp/head && tar -xzf build/out/session/head_tree.tgz -C /tmp/head
(cd /tmp/head && PYTHONPATH=/tmp/head $P perf/profile_vocoder.py --out $OUT/head/profile_vocoder.json --modes bf16_ops --batches 64,256 --iters 7 2>&1 | tail -8)
PYTHONPATH=$PWD $P perf/profile_vocoder.py --out $OUT/voc/profile_vocoder.json --modes bf16_ops --batches 16,64,128,256 --new-patches 1,2,4 --iters 7 --profile-batches 256 2>&1 | tail -20
PYTHONPATH=$PWD timeout 280 $P -m pytest -q -m gpu tests/gpu/test_vocoder_gpu.py tests/gpu/test_vocoder_fast_layers_gpu.py 2>&1 | tail -15
