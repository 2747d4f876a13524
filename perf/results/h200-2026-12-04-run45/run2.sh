#!/bin/bash
# Device call 2: the final kernel (full library build) against base: bits, kernel alone, step A/B, GPU tests.
P=/opt/torch/.venv/bin/python3
D=build/out/session_sa
export PYTHONPATH=$PWD
mkdir -p /tmp/libs /tmp/res
for n in base v80 final; do $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $D/$n.so.xz /tmp/libs/$n.so; done
$P $D/sa_bench.py /tmp/res base=/tmp/libs/base.so v80=/tmp/libs/v80.so final=/tmp/libs/final.so 2>&1 | tee $OUT/bench.log
cp /tmp/res/kernel.json $OUT/
VOXCPM_KERNELS_LIB=/tmp/libs/final.so timeout 60 $P -m pytest -q -m gpu tests/gpu/test_short_attention_gpu.py > /tmp/res/pytest_final.log 2>&1
tail -1 /tmp/res/pytest_final.log | tee $OUT/pytest.log
$P perf/ab_step.py --out /tmp/res/ab --variant base=VOXCPM_KERNELS_LIB=/tmp/libs/base.so \
   --variant final=VOXCPM_KERNELS_LIB=/tmp/libs/final.so --batches 64,256 --repeats 2 --run-timeout-s 70 2>&1 | tee $OUT/ab.log
tar czf $OUT/res.tar.gz -C /tmp res
