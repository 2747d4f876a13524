# Run 68, device call 2: the served stack on this tree, first since run 54 (PatchWindows, the host
# work of run 65, lt_cache): bursts at 1-256 streams and perf_analyzer at 1 and 16, the decoder
# starting from call 1's tuned lt_cache file; then the served GPU tests.
# carry: ["build/out/session", "build/out/device_slim"] (session: lib.so.xz, deep.json from call 1,
# commit). device_slim is build/device_bundle.sh's folder cut to fit the 64 MiB beside the tree: the
# baselines' wheels left out (this call serves ours only), numpy's wheel as an xz tarball of its files
# (9 MB against 18), zipped back into a wheel here.
set -u
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib.so.xz build/out/lib/libvoxcpm_kernels.so
cp build/out/session/deep.json build/out/lt_cache.json
rm -rf build/out/device && mv build/out/device_slim build/out/device
$P - <<'PY'
import io, tarfile, zipfile
name = "build/out/device/wheels/numpy-1.26.4-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
with tarfile.open("build/out/device/numpy_whl.tar.xz") as tar, zipfile.ZipFile(name, "w") as wheel:
    for member in tar.getmembers():
        if member.isfile():
            wheel.writestr(member.name.removeprefix("./"), tar.extractfile(member).read())
PY
export VOXCPM_GIT_COMMIT=$(cat build/out/session/commit) PYTHONUNBUFFERED=1
T0=$(date +%s)
OUT=$OUT/c bash perf/gpu_campaign.sh setup > $OUT/setup.log 2>&1; echo "setup rc=$? at $(( $(date +%s) - T0 )) s"
LEVELS=1,16,64,256 MIN_REQUESTS=64 PA_LEVELS="1 16" CAMPAIGN_BUDGET_S=330 OUT=$OUT/c bash perf/gpu_campaign.sh triton | tail -2
echo "campaign done at $(( $(date +%s) - T0 )) s"
export VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
left=$(( 575 - ($(date +%s) - T0) ))
timeout $left build/out/venv/bin/python -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_triton_gpu.py > $OUT/gpu_triton_tests.log 2>&1
echo "triton tests rc=$?"; tail -2 $OUT/gpu_triton_tests.log
rm -f $OUT/c/plots.png
sed -n '/^| /p' $OUT/c/summary.md | head -30
grep -h "ready after\|stream_load\|lt_search\|walk" build/out/campaign/results/logs/*.log | head -5
cp build/out/lt_cache.json $OUT/served_lt_cache.json
