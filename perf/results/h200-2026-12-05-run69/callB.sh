# Run 69, device call B (run 68's prepared call 3, with the shipped lt_cache seed instead of a cache
# file): the served stack under CUDA MPS (VOXCPM_MPS=1), the ar_decoder's process at the driver's
# normal priority and then below normal (VOXCPM_DECODER_MPS_PRIORITY=1, the mps_priority patch of
# run 68), so that a due vocoder window need not queue behind a decode step. The server starts with
# no build/out/lt_cache.json: how long it takes to be ready with the seed alone, and which shapes it
# still walked. Also the first device run of the bundle's xz wheels.
# carry: ["build/out/session", "build/out/device"] (session: lib.so.xz, main's library, sm_90; commit).
set -u
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib.so.xz build/out/lib/libvoxcpm_kernels.so
rm -f build/out/lt_cache.json
export VOXCPM_GIT_COMMIT=$(cat build/out/session/commit) PYTHONUNBUFFERED=1
T0=$(date +%s)
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; echo "setup rc=$? at $(( $(date +%s) - T0 )) s"
tail -3 build/out/campaign/results/logs/setup_venv.log 2>/dev/null
for v in normal below; do
  [ $v = below ] && export VOXCPM_DECODER_MPS_PRIORITY=1
  VOXCPM_MPS=1 LEVELS=1,16,64 MIN_REQUESTS=32 PA_LEVELS="1 16" CAMPAIGN_BUDGET_S=170 OUT=$OUT/$v bash perf/gpu_campaign.sh triton | tail -1
  echo "$v done at $(( $(date +%s) - T0 )) s"; grep -h "ready after" $OUT/$v/campaign.log
  $P -c "import json,sys; d=json.load(open(sys.argv[1])); print('lt_cache.json shapes walked:', {s: len(v) for s, v in d.items()})" build/out/lt_cache.json 2>/dev/null || echo "no lt_cache.json written"
  rm -f $OUT/$v/plots.png
done
cp build/out/lt_cache.json $OUT/served_lt_cache.json 2>/dev/null
for v in normal below; do echo "== $v"; sed -n '/^| /p' $OUT/$v/summary.md | grep -v "text_encoder\|voxcpm " | head -24; done
