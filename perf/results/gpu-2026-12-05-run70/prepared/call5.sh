# Prepared: main with decode_attention_wide.patch and row_scale_beside.patch together (the tree
# build/out/session/trees/both, its library lib_w8.so.xz): the GPU tests the beside patch touches
# (call2's first line); an interleaved A/B against main at 64 streams (neither patch changes a grid
# below ~47 streams); then that tree's step at 1 and 64 streams, at 300 and at 60 cached tokens,
# where profile_step times the Engine's launch-ahead ("ahead") beside the default ("step").
# Before, on the CPU machine: bash perf/results/gpu-2026-12-05-run70/prepared/make_tree.sh both
# decode_attention_wide row_scale_beside (HEAD's files with the patches).
# carry: ["build/out/session"]
set -u
source perf/device_call_env.sh
B=$PWD/build/out/session/trees/both
mkdir -p $B/build/out/lib /tmp/r73c5
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" \
  build/out/session/lib_w8.so.xz $B/build/out/lib/libvoxcpm_kernels.so
BL=$B/build/out/lib/libvoxcpm_kernels.so
(cd $B && PYTHONPATH=$B VOXCPM_KERNELS_LIB=$BL timeout 150 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_folded_norms_gpu.py tests/gpu/test_engine_gpu.py \
  tests/gpu/test_graph_runner.py tests/gpu/test_decode_attention_gpu.py > /tmp/r73c5/tests.log 2>&1); at tests $?; tail -1 /tmp/r73c5/tests.log
timeout $(left 400) $P perf/ab_step.py --out /tmp/r73c5/ab --variant main=VOXCPM_LT_CACHE=/tmp/ab_lt.json \
  --variant both@$B=VOXCPM_LT_CACHE=/tmp/ab_lt.json --batches 64 --repeats 3 > /tmp/r73c5/ab.log 2>&1; at ab $?
tail -4 /tmp/r73c5/ab/ab_step.md 2>/dev/null
for ctx in 300 60; do
  l=$(left 560); [ $l -gt 40 ] && (cd $B && PYTHONPATH=$B VOXCPM_KERNELS_LIB=$BL VOXCPM_LT_CACHE=/tmp/ab_lt.json \
    timeout $l $P perf/profile_step.py --out /tmp/r73c5/ctx$ctx --batches 1,64 --context $ctx --modes graph_ops \
    --profile-batches= > /tmp/r73c5/ctx$ctx.log 2>&1); at "ctx $ctx" $?
  grep -A4 "^| mode" /tmp/r73c5/ctx$ctx.log | tail -n +3
done
cd /tmp && tar czf $OUT/r73c5.tgz r73c5
