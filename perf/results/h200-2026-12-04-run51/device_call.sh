# wip/split-step: the fixed-shape step as two halves on two CUDA streams, against one, interleaved.
set -x
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
export PYTHONPATH=$PWD VOXCPM_GIT_COMMIT=$(cat build/out/session/commit)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv
timeout 300 $P perf/ab_step.py --out /tmp/ab --variant base=VOXCPM_SPLIT_STEP=0 --variant split=VOXCPM_SPLIT_STEP=16 \
    --batches 16,64,256 --repeats 2 --no-throwaway --run-timeout-s 70
cat /tmp/ab/ab_step.md
grep -h "graph_failure\|Error\|error" /tmp/ab/*/profile_step.log | head -20
tar czf $OUT/ab_split.tgz -C /tmp ab
