# Served A/B: ar_decoder chunk_patches 4 (committed default) against 1 (one patch per window).
set -x
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
OUT_ROOT=$OUT
OUT=$OUT_ROOT/chunk4 bash perf/gpu_campaign.sh setup
LEVELS=1,16,64 PA_LEVELS="" CAMPAIGN_BUDGET_S=215 OUT=$OUT_ROOT/chunk4 bash perf/gpu_campaign.sh triton
sed -i 's/key: "chunk_patches" value: { string_value: "4" }/key: "chunk_patches" value: { string_value: "1" }/' model_repository/ar_decoder/config.pbtxt
grep -n chunk_patches model_repository/ar_decoder/config.pbtxt
LEVELS=1,16,64 PA_LEVELS="" CAMPAIGN_BUDGET_S=215 OUT=$OUT_ROOT/chunk1 bash perf/gpu_campaign.sh triton
