# Prepared: one call for a session that may get only one machine. In build/out/session/trees/both
# (make_tree.sh both decode_attention_wide row_scale_beside: main's files with both patches, library
# lib_w8.so.xz): the whole GPU tier (main's new tests of its device handling and graph capture, and
# the patches' own); an interleaved A/B against main at 64 streams; that tree's step at 1 and 64
# streams at 300 and at 60 cached tokens, where profile_step times the Engine's launch-ahead
# ("ahead") beside the default ("step").
# carry: ["build/out/session"]
set -u
source perf/device_call_env.sh
B=$PWD/build/out/session/trees/both
BL=$B/build/out/lib/libvoxcpm_kernels.so
mkdir -p $B/build/out/lib /tmp/r73c7
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_w8.so.xz $BL
(cd $B && PYTHONPATH=$B VOXCPM_KERNELS_LIB=$BL timeout 270 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu \
  > /tmp/r73c7/gpu_tier.log 2>&1); at "gpu tier (both)" $?; tail -3 /tmp/r73c7/gpu_tier.log
l=$(left 470); [ $l -gt 60 ] && timeout $l $P perf/ab_step.py --out /tmp/r73c7/ab --variant main=VOXCPM_LT_CACHE=/tmp/ab_lt.json \
  --variant both@$B=VOXCPM_LT_CACHE=/tmp/ab_lt.json --batches 64 --repeats 2 > /tmp/r73c7/ab.log 2>&1; at ab $?
tail -3 /tmp/r73c7/ab/ab_step.md 2>/dev/null
for ctx in 300 60; do
  l=$(left 585); [ $l -gt 30 ] && (cd $B && PYTHONPATH=$B VOXCPM_KERNELS_LIB=$BL VOXCPM_LT_CACHE=/tmp/ab_lt.json \
    timeout $l $P perf/profile_step.py --out /tmp/r73c7/ctx$ctx --batches 64,1 --context $ctx --modes graph_ops \
    --profile-batches= > /tmp/r73c7/ctx$ctx.log 2>&1); at "ctx $ctx" $?
  grep -A4 "^| mode" /tmp/r73c7/ctx$ctx.log | tail -n +3
done
cd /tmp && tar czf $OUT/r73c7.tgz r73c7
