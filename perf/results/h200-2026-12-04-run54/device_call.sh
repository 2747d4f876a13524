# The vocoder's dynamic batcher: max_queue_delay 0 (committed) against 2000 us, interleaved A B A B, served.
set -x
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
OUT_ROOT=$OUT
export VOXCPM_GIT_COMMIT=$(cat build/out/session/commit)
OUT=/tmp/setup bash perf/gpu_campaign.sh setup > /dev/null
CFG=model_repository/vocoder/config.pbtxt
for v in d0_a d2000_a d0_b d2000_b; do
    delay=${v#d}; delay=${delay%_*}
    sed -i "s/max_queue_delay_microseconds: [0-9]*/max_queue_delay_microseconds: $delay/" $CFG
    grep dynamic_batching $CFG
    LEVELS=64,256 MIN_REQUESTS=128 PA_LEVELS="16" CAMPAIGN_BUDGET_S=120 OUT=/tmp/$v bash perf/gpu_campaign.sh triton | tail -1
    cp /tmp/$v/summary.md $OUT_ROOT/summary_$v.md
done
sed -i "s/max_queue_delay_microseconds: [0-9]*/max_queue_delay_microseconds: 0/" $CFG
for v in d0_a d2000_a d0_b d2000_b; do echo "== $v"; sed -n '/^| concurrency/,/^$/p' $OUT_ROOT/summary_$v.md; grep "| vocoder" $OUT_ROOT/summary_$v.md; grep -A4 "first response p50" $OUT_ROOT/summary_$v.md | tail -2; done
