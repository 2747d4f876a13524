# Run 70, device call 2: the GPU tests of the folded LocDiT layer with its row statistic queued
# beside the qkv GEMM (side_stream.Beside); whether a graph's replay() blocks the host past some node
# count (graph_launch_probe.py: the FP8 step's does); an A/B of the statistic beside the GEMM against
# before it at 64 streams; the down projection's tile landscape (tile_landscape.py); the walk before and with
# recustomised tiles at 0.5 s and 3 s for the LocDiT's projections at 1408 rows; the step at 60
# cached tokens; the opt-in FP8 LocDiT beside bf16 at 256 and 512 streams.
# carry: ["build/out/session"] (lib.so.xz: main's library for sm_90, kernels unchanged since; commit).
# Prepared, not run (run 70: the tool stopped lending machines). First, on the CPU machine, from the
# repository root, keep main's copies of the files the patches change (the "before" and "serial"
# trees below), then apply the patches:
#   mkdir -p build/out/session/before && for f in voxcpm_triton/ops/lt_search.py \
#     voxcpm_triton/model/minicpm.py voxcpm_triton/model/attention.py; do cp $f build/out/session/before/; done
#   git apply perf/results/gpu-2026-12-05-run70/prepared/{walk_recustomised,row_scale_beside}.patch
set -u
source perf/device_call_env.sh
R=perf/results/gpu-2026-12-05-run70
mkdir -p /tmp/r70
timeout 150 $P -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_folded_norms_gpu.py tests/gpu/test_engine_gpu.py \
  tests/gpu/test_graph_runner.py > /tmp/r70/beside_tests.log 2>&1; at "beside tests" $?; tail -1 /tmp/r70/beside_tests.log
timeout 120 $P $R/graph_launch_probe.py /tmp/r70/graph_launch.md > /tmp/r70/graph_launch.log 2>&1; at "graph launch probe" $?
cat /tmp/r70/graph_launch.md
# Trees: "before" has main's lt_search.py (the walk without recustomised), "serial" main's statistic before the GEMM.
for t in before serial; do mkdir -p /tmp/$t && cp -r voxcpm_triton perf /tmp/$t/; done
B=build/out/session/before
cp $B/lt_search.py /tmp/before/voxcpm_triton/ops/; cp $B/minicpm.py $B/attention.py /tmp/serial/voxcpm_triton/model/
timeout $(left 330) $P perf/ab_step.py --out /tmp/r70/ab --variant serial@/tmp/serial=VOXCPM_KERNELS_LIB=$VOXCPM_KERNELS_LIB,VOXCPM_LT_CACHE=/tmp/ab_lt.json \
  --variant beside=VOXCPM_LT_CACHE=/tmp/ab_lt.json --batches 64 --repeats 3 > /tmp/r70/ab.log 2>&1; at ab $?; cat /tmp/r70/ab/ab_step.md 2>/dev/null | tail -4
timeout 90 $P $R/tile_landscape.py /tmp/r70/landscape.md > /tmp/r70/landscape.log 2>&1; at landscape $?; head -4 /tmp/r70/landscape.md
for b in 0.5 3; do
  for w in before after; do
    tree=$PWD; [ $w = before ] && tree=/tmp/before
    (cd $tree && PYTHONPATH=$tree timeout 60 $P -m perf.lt_config_search --streams 64 --budget-s $b --only "dit down,dit o_proj,dit qkv" \
      --out /tmp/r70/search_${w}_$b.md > /tmp/r70/search_${w}_$b.log 2>&1); at "search $w $b" $?
    tail -3 /tmp/r70/search_${w}_$b.md
  done
done
# How much of the 64-stream step is the 300 cached tokens every profile so far has used: a 30-token
# text generating a fixed 50 patches holds ~57 on average.
l=$(left 560); [ $l -gt 40 ] && VOXCPM_LT_CACHE=/tmp/ab_lt.json timeout $l $P perf/profile_step.py --out /tmp/r70/ctx60 \
  --batches 1,64 --context 60 --modes graph_ops --profile-batches= > /tmp/r70/ctx60.log 2>&1; at ctx60 $?
grep -A4 "^| mode" /tmp/r70/ctx60.log | tail -n +3
l=$(left 565); [ $l -gt 60 ] && timeout $l $P perf/profile_step.py --out /tmp/r70/fp8big --batches 256,512 \
  --modes graph_ops,graph_ops_fp8 --profile-batches= > /tmp/r70/fp8big.log 2>&1; at fp8big $?
grep -A6 "^| mode" /tmp/r70/fp8big.log | tail -n +3
cd /tmp && tar czf $OUT/r70c2.tgz r70
