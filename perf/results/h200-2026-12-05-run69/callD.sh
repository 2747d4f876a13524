# Run 69, device call D: the served GPU tests on main after this session's changes (the shipped
# lt_cache seed, the ar_decoder's mps_priority parameter at "1"), no lt_cache file beforehand; then,
# time allowing, the opt-in FP8 LocDiT's step at 64 streams beside bf16's (not measured since run 16).
# carry: ["build/out/session", "build/out/device"] (session: lib.so.xz, main's library, sm_90; commit).
set -u
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib.so.xz build/out/lib/libvoxcpm_kernels.so
rm -f build/out/lt_cache.json
export VOXCPM_GIT_COMMIT=$(cat build/out/session/commit) PYTHONUNBUFFERED=1
T0=$(date +%s)
OUT=$OUT/setup bash perf/gpu_campaign.sh setup > /dev/null 2>&1; echo "setup rc=$? at $(( $(date +%s) - T0 )) s"
export VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
timeout 240 build/out/venv/bin/python -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_triton_gpu.py > $OUT/gpu_triton_tests.log 2>&1
echo "triton tests rc=$? at $(( $(date +%s) - T0 )) s"; tail -2 $OUT/gpu_triton_tests.log
ls build/out/lt_cache.json 2>/dev/null || echo "no lt_cache.json written"
rm -rf $OUT/setup
left=$(( 300 - ($(date +%s) - T0) ))
[ $left -gt 40 ] && PYTHONPATH=$PWD timeout $left /opt/torch/.venv/bin/python3 perf/profile_step.py --out /tmp/fp8 \
  --batches 64 --modes graph_ops,graph_ops_fp8 --profile-batches= > $OUT/fp8.log 2>&1
echo "fp8 rc=$? at $(( $(date +%s) - T0 )) s"; grep -A4 "^| mode" $OUT/fp8.log | head -5
