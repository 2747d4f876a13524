# Run 68, device call 3, prepared and NOT run (no device time was left): `git apply` mps_priority.patch first.
# What it measures: the served stack under CUDA MPS (VOXCPM_MPS=1),
# with the ar_decoder's process at the driver's normal priority and then below normal
# (VOXCPM_DECODER_MPS_PRIORITY=1), so that a due vocoder window need not queue behind a decode step.
# carry: ["build/out/session", "build/out/device"] (deep.json: call 2's served file; the bundle as
# build/device_bundle.sh now writes it, numpy and grpcio as .whl.tar.xz: the first run of its unpacking).
set -u
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib.so.xz build/out/lib/libvoxcpm_kernels.so
cp build/out/session/deep.json build/out/lt_cache.json
export VOXCPM_GIT_COMMIT=$(cat build/out/session/commit) PYTHONUNBUFFERED=1
T0=$(date +%s)
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; echo "setup rc=$? at $(( $(date +%s) - T0 )) s"
tail -4 build/out/campaign/results/logs/setup_venv.log
for v in normal below; do
  [ $v = below ] && export VOXCPM_DECODER_MPS_PRIORITY=1
  VOXCPM_MPS=1 LEVELS=1,16,64 MIN_REQUESTS=32 PA_LEVELS="1 16" CAMPAIGN_BUDGET_S=150 OUT=$OUT/$v bash perf/gpu_campaign.sh triton | tail -1
  echo "$v done at $(( $(date +%s) - T0 )) s"
  rm -f $OUT/$v/plots.png
done
for v in normal below; do echo "== $v"; sed -n '/^| /p' $OUT/$v/summary.md | grep -v "text_encoder\|voxcpm " | head -24; done
