# Run 70, device call 2: the down projection's tile landscape (tile_landscape.py); the walk before
# and with recustomised tiles at 0.5 s and 3 s for the LocDiT's projections at 1408 rows; a 64-stream start
# without the seed (as on a GPU the seed does not cover) on that walk; the step at 60 cached tokens;
# the opt-in FP8 LocDiT beside bf16 at 256 and 512 streams.
# carry: ["build/out/session"] (lib.so.xz: main's library for sm_90, kernels unchanged since; commit).
set -u
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib /tmp/r70
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib.so.xz build/out/lib/libvoxcpm_kernels.so
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
T0=$(date +%s)
timeout 120 $P perf/results/gpu-2026-12-05-run70/tile_landscape.py $OUT/landscape.md; echo "landscape rc=$? at $(( $(date +%s) - T0 )) s"
# The walk before this change, from a copy of the package with run 70's first lt_search.py in it.
mkdir -p /tmp/before && cp -r voxcpm_triton perf /tmp/before/ && cp perf/results/gpu-2026-12-05-run70/lt_search_before.py /tmp/before/voxcpm_triton/ops/lt_search.py
for b in 0.5 3; do
  for w in before after; do
    tree=$PWD; [ $w = before ] && tree=/tmp/before
    (cd $tree && PYTHONPATH=$tree timeout 90 $P -m perf.lt_config_search --streams 64 --budget-s $b --only "dit down,dit o_proj,dit qkv" \
      --out /tmp/r70/search_${w}_$b.md > /tmp/r70/search_${w}_$b.log 2>&1); echo "search $w $b rc=$? at $(( $(date +%s) - T0 )) s"
    tail -3 /tmp/r70/search_${w}_$b.md
  done
done
s=$(date +%s)
VOXCPM_LT_CACHE_SEED= VOXCPM_LT_CACHE= timeout 150 $P perf/profile_step.py --out /tmp/r70/noseed --batches 64 \
  --modes graph_ops --profile-batches 64 > /tmp/r70/noseed.log 2>&1
echo "noseed rc=$? wall $(( $(date +%s) - s )) s"; grep -A3 "^| mode" /tmp/r70/noseed.log | tail -1
# How much of the 64-stream step is the 300 cached tokens every profile so far has used: a 30-token
# text generating a fixed 50 patches holds ~57 on average.
timeout 90 $P perf/profile_step.py --out /tmp/r70/ctx60 --batches 1,64 --context 60 --modes graph_ops \
  --profile-batches= > /tmp/r70/ctx60.log 2>&1
echo "ctx60 rc=$? at $(( $(date +%s) - T0 )) s"; grep -A4 "^| mode" /tmp/r70/ctx60.log | tail -n +3
left=$(( 560 - ($(date +%s) - T0) ))
[ $left -gt 60 ] && timeout $left $P perf/profile_step.py --out /tmp/r70/fp8big --batches 256,512 \
  --modes graph_ops,graph_ops_fp8 --profile-batches= > /tmp/r70/fp8big.log 2>&1
echo "fp8big rc=$? at $(( $(date +%s) - T0 )) s"; grep -A6 "^| mode" /tmp/r70/fp8big.log | tail -n +3
cd /tmp && tar czf $OUT/r70c2.tgz r70
