# Run 70, device call 1 (whichever single GPU the tool lends; since this session it is mostly an
# H100): run 69's prepared call D (the served GPU tests on main with mps_priority "1" and the shipped
# seed, no lt_cache file beforehand), then the step at 1 and 64 streams from 3 s walks that fill an
# lt_cache file (deep.json: on a GPU the seed does not cover, the material for a seed section of its
# own), the opt-in FP8 LocDiT beside bf16 at 64 streams, and 10 s searches of the LocDiT's
# projections at 1408 rows (what a walk misses).
# carry: ["build/out/session", "build/out/device"] (session: lib.so.xz, main's library for sm_90; commit).
set -u
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib.so.xz build/out/lib/libvoxcpm_kernels.so
rm -f build/out/lt_cache.json
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv > $OUT/gpu.txt 2>&1; cat $OUT/gpu.txt
export VOXCPM_GIT_COMMIT=$(cat build/out/session/commit) PYTHONUNBUFFERED=1
T0=$(date +%s)
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /tmp/setup.log 2>&1; echo "setup rc=$? at $(( $(date +%s) - T0 )) s"
export VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
timeout 240 build/out/venv/bin/python -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_triton_gpu.py > $OUT/gpu_triton_tests.log 2>&1
echo "triton tests rc=$? at $(( $(date +%s) - T0 )) s"; tail -2 $OUT/gpu_triton_tests.log
cp build/out/lt_cache.json $OUT/served_lt_cache.json 2>/dev/null || echo "no lt_cache.json written"
rm -rf $OUT/setup
export PYTHONPATH=$PWD
mkdir -p /tmp/r70
step() {  # name, env..., then -- profile_step arguments
  local name=$1; shift; local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local left=$(( 575 - ($(date +%s) - T0) )); [ $left -lt 30 ] && { echo "$name skipped"; return; }
  local s=$(date +%s)
  env "${envs[@]}" timeout $left $P perf/profile_step.py --out /tmp/r70/$name "$@" > /tmp/r70/$name.log 2>&1
  echo "$name rc=$? wall $(( $(date +%s) - s )) s"; grep -A4 "^| mode" /tmp/r70/$name.log | tail -n +3
}
step deep VOXCPM_LT_SEARCH_S=3 VOXCPM_LT_SEARCH_TOTAL_S=200 VOXCPM_LT_CACHE=$OUT/deep.json -- --batches 1,64 --modes graph_ops --profile-batches 64
step fp8 VOXCPM_LT_CACHE=$OUT/deep.json -- --batches 64 --modes graph_ops,graph_ops_fp8 --profile-batches=
left=$(( 570 - ($(date +%s) - T0) ))
[ $left -gt 45 ] && timeout $left $P -m perf.lt_config_search --streams 64 --budget-s 10 \
  --only "dit down,dit o_proj,dit qkv" --out /tmp/r70/search.md > /tmp/r70/search.log 2>&1
echo "search rc=$? at $(( $(date +%s) - T0 )) s"; tail -8 /tmp/r70/search.md 2>/dev/null
cd /tmp && tar czf $OUT/r70.tgz r70
