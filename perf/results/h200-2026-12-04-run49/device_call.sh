# chunk_patches 8 against 4 (both ar_decoder and vocoder), served, same call; the vocoder alone at k = 4 and 8.
set -x
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
OUT_ROOT=$OUT
export VOXCPM_GIT_COMMIT=$(cat build/out/session/commit)
OUT=$OUT_ROOT/chunk8 bash perf/gpu_campaign.sh setup > /dev/null
( mkdir -p /tmp/pv; export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
  timeout 80 $P perf/profile_vocoder.py --out /tmp/pv/pv.json --modes bf16_ops --batches 8,16,32,64 \
      --new-patches 4,8 --iters 7 > /tmp/pv/log 2>&1; tail -14 /tmp/pv/log; cp /tmp/pv/pv.md $OUT_ROOT/ )
sed -i 's/key: "chunk_patches" value: { string_value: "4" }/key: "chunk_patches" value: { string_value: "8" }/' \
    model_repository/ar_decoder/config.pbtxt model_repository/vocoder/config.pbtxt
grep -h chunk_patches model_repository/ar_decoder/config.pbtxt model_repository/vocoder/config.pbtxt | grep key
LEVELS=16,64,256 MIN_REQUESTS=128 PA_LEVELS="16" CAMPAIGN_BUDGET_S=150 OUT=$OUT_ROOT/chunk8 bash perf/gpu_campaign.sh triton | tail -1
git checkout model_repository/ar_decoder/config.pbtxt model_repository/vocoder/config.pbtxt 2>/dev/null || \
  sed -i 's/key: "chunk_patches" value: { string_value: "8" }/key: "chunk_patches" value: { string_value: "4" }/' \
    model_repository/ar_decoder/config.pbtxt model_repository/vocoder/config.pbtxt
grep -h chunk_patches model_repository/ar_decoder/config.pbtxt model_repository/vocoder/config.pbtxt | grep key
LEVELS=16,64,256 MIN_REQUESTS=128 PA_LEVELS="16" CAMPAIGN_BUDGET_S=150 OUT=$OUT_ROOT/chunk4 bash perf/gpu_campaign.sh triton | tail -1
rm -f $OUT_ROOT/*/plots.png
for v in chunk8 chunk4; do echo "== $v"; sed -n '/^| concurrency/,/^$/p;/^| level | steps/,/^$/p;/perf_analyzer/,$p' $OUT_ROOT/$v/summary.md; grep "c=64 | vocoder\|c=256 | vocoder" $OUT_ROOT/$v/summary.md; done
