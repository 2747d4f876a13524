#!/bin/bash
# Device call 1 (as run; sa_bench.py's kernel shapes were then the first six of its current list):
# decompress the libraries, bit identity + kernel timing, A/B of the step (base vs best), GPU tests.
P=/opt/torch/.venv/bin/python3
D=build/out/session_sa
export PYTHONPATH=$PWD
mkdir -p /tmp/libs /tmp/res
names=""
for f in $D/*.so.xz; do n=$(basename $f .so.xz); $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $f /tmp/libs/$n.so; names="$names $n"; done
echo "libs:$names"; nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv
args="base=/tmp/libs/base.so"; for n in $names; do [ $n != base ] && args="$args $n=/tmp/libs/$n.so"; done
$P $D/sa_bench.py /tmp/res $args 2>&1 | tee $OUT/bench.log
read -r best second rest < /tmp/res/ranked.txt; cp /tmp/res/kernel.json $OUT/
echo "best=$best second=$second"
if [ -n "$best" ]; then
  $P perf/ab_step.py --out /tmp/res/ab --variant base=VOXCPM_KERNELS_LIB=/tmp/libs/base.so \
     --variant $best=VOXCPM_KERNELS_LIB=/tmp/libs/$best.so --batches 64,256 --repeats 2 --run-timeout-s 70 2>&1 | tee $OUT/ab.log
fi
for n in $names; do VOXCPM_KERNELS_LIB=/tmp/libs/$n.so timeout 100 $P -m pytest -q -m gpu tests/gpu/test_short_attention_gpu.py > /tmp/res/pytest_$n.log 2>&1 & done
wait
for n in $names; do echo "== $n: $(tail -1 /tmp/res/pytest_$n.log)"; done | tee $OUT/pytest.log
tar czf $OUT/res.tar.gz -C /tmp res
