#!/bin/bash
# Device call 3: step A/B at 256 streams, base vs final, three interleaved repeats.
P=/opt/torch/.venv/bin/python3
D=build/out/session_sa
export PYTHONPATH=$PWD
mkdir -p /tmp/libs
for n in base final; do $P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" $D/$n.so.xz /tmp/libs/$n.so; done
$P perf/ab_step.py --out $OUT/ab --variant base=VOXCPM_KERNELS_LIB=/tmp/libs/base.so \
   --variant final=VOXCPM_KERNELS_LIB=/tmp/libs/final.so --batches 256 --repeats 3 --run-timeout-s 40 2>&1 | tee $OUT/ab.log
