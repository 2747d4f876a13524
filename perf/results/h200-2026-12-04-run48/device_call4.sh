# Served under a private MPS daemon (VOXCPM_MPS=1 through build/tritonserver.sh), then without, same call.
set -x
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
OUT_ROOT=$OUT
export VOXCPM_GIT_COMMIT=$(cat build/out/session/commit)
OUT=$OUT_ROOT/mps bash perf/gpu_campaign.sh setup > /dev/null
VOXCPM_MPS=1 LEVELS=1,16,64 PA_LEVELS="1 16 64" CAMPAIGN_BUDGET_S=170 OUT=$OUT_ROOT/mps bash perf/gpu_campaign.sh triton | tail -2
ls build/out/mps/ && cat build/out/mps/*/log/control.log | head -5
LEVELS=1,16,64 PA_LEVELS="1 16 64" CAMPAIGN_BUDGET_S=170 OUT=$OUT_ROOT/plain bash perf/gpu_campaign.sh triton | tail -2
ls build/out/mps/ ; pgrep -a nvidia-cuda-mps || echo "no mps daemon left"
for v in mps plain; do sed -n '/^| concurrency/,/^$/p;/engine thread/,/^$/p;/perf_analyzer/,$p' $OUT_ROOT/$v/summary.md > $OUT_ROOT/$v.md; done
rm -f $OUT_ROOT/*/plots.png
cat $OUT_ROOT/mps.md $OUT_ROOT/plain.md
