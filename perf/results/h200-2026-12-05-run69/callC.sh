# Run 69, device call C: the lt_cache GPU tests with the shipped seed in the tree; a 64-stream decoder
# start with the seed alone (no cache file); then call B's MPS priority comparison again, in the
# other order (below, normal, below, normal), for its run-to-run spread.
# carry: ["build/out/session", "build/out/device"] (session: lib.so.xz, main's library, sm_90; commit).
set -u
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib.so.xz build/out/lib/libvoxcpm_kernels.so
rm -f build/out/lt_cache.json
export VOXCPM_GIT_COMMIT=$(cat build/out/session/commit) PYTHONUNBUFFERED=1
T0=$(date +%s)
VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so PYTHONPATH=$PWD timeout 90 $P -m pytest -q -p no:cacheprovider -m gpu \
  tests/gpu/test_lt_search_gpu.py tests/gpu/test_lt_gemm_gpu.py > $OUT/lt_tests.log 2>&1
echo "lt tests rc=$? at $(( $(date +%s) - T0 )) s"; tail -2 $OUT/lt_tests.log
s=$(date +%s.%N)
VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so PYTHONPATH=$PWD timeout 80 $P perf/profile_step.py --out /tmp/seedonly \
  --batches 64 --modes graph_ops --profile-batches= > $OUT/seed_only.log 2>&1
echo "seed-only start rc=$? wall $($P -c "import time;print(round(time.time()-$s,1))") s"; grep -A3 "^| mode" $OUT/seed_only.log | tail -1
ls build/out/lt_cache.json 2>/dev/null
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; echo "setup rc=$? at $(( $(date +%s) - T0 )) s"
for v in below1 normal1 below2 normal2; do
  left=$(( 570 - ($(date +%s) - T0) )); [ $left -lt 90 ] && { echo "$v skipped"; continue; }
  case $v in below*) export VOXCPM_DECODER_MPS_PRIORITY=1 ;; *) unset VOXCPM_DECODER_MPS_PRIORITY ;; esac
  VOXCPM_MPS=1 LEVELS=1,16,64 MIN_REQUESTS=32 PA_LEVELS="1 16" CAMPAIGN_BUDGET_S=$(( left < 170 ? left : 170 )) OUT=$OUT/$v \
    bash perf/gpu_campaign.sh triton | tail -1
  echo "$v done at $(( $(date +%s) - T0 )) s"
  rm -f $OUT/$v/plots.png $OUT/$v/campaign.log
done
for v in below1 normal1 below2 normal2; do echo "== $v"; sed -n '/^| /p' $OUT/$v/summary.md 2>/dev/null | grep -v "text_encoder\|voxcpm \|ar_decoder" | head -16; done
