# Run 70, device call 2, cut down in run 75's session (the row statistic beside the qkv GEMM was
# rejected there, and call10.sh times the step at 60 cached tokens): whether a graph's replay()
# blocks the host past some node count (graph_launch_probe.py: the FP8 step's does); the down
# projection's tile landscape (tile_landscape.py); the walk before and with recustomised tiles at
# 0.5 s and 3 s for the LocDiT's projections at 1408 rows; the opt-in FP8 LocDiT beside bf16 at 256
# and 512 streams.
# First, on the CPU machine: make_tree.sh walk walk_recustomised
# carry: ["build/out/session/lib.so.xz", "build/out/session/commit", "build/out/session/trees/walk"]
set -u
source perf/device_call_env.sh
R=perf/results/gpu-2026-12-05-run70
mkdir -p /tmp/r70
timeout 120 $P $R/graph_launch_probe.py /tmp/r70/graph_launch.md > /tmp/r70/graph_launch.log 2>&1; at "graph launch probe" $?
cat /tmp/r70/graph_launch.md
timeout 90 $P $R/tile_landscape.py /tmp/r70/landscape.md > /tmp/r70/landscape.log 2>&1; at landscape $?; head -4 /tmp/r70/landscape.md
for b in 0.5 3; do
  for w in before after; do
    tree=$PWD; [ $w = after ] && tree=$PWD/build/out/session/trees/walk
    (cd $tree && PYTHONPATH=$tree timeout 60 $P -m perf.lt_config_search --streams 64 --budget-s $b --only "dit down,dit o_proj,dit qkv" \
      --out /tmp/r70/search_${w}_$b.md > /tmp/r70/search_${w}_$b.log 2>&1); at "search $w $b" $?
    tail -3 /tmp/r70/search_${w}_$b.md
  done
done
l=$(left 565); [ $l -gt 60 ] && timeout $l $P perf/profile_step.py --out /tmp/r70/fp8big --batches 256,512 \
  --modes graph_ops,graph_ops_fp8 --profile-batches= > /tmp/r70/fp8big.log 2>&1; at fp8big $?
grep -A6 "^| mode" /tmp/r70/fp8big.log | tail -n +3
cd /tmp && tar czf $OUT/r70c2.tgz r70
