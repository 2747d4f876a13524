# text_encoder with two instances (committed) against one, served bursts, same call; the GPU configs on a real server.
set -x
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
OUT_ROOT=$OUT
export VOXCPM_GIT_COMMIT=$(cat build/out/session/commit)
OUT=$OUT_ROOT/te2 bash perf/gpu_campaign.sh setup > /dev/null
LEVELS=16,64,256 MIN_REQUESTS=128 PA_LEVELS="16" CAMPAIGN_BUDGET_S=150 OUT=$OUT_ROOT/te2 bash perf/gpu_campaign.sh triton | tail -1
sed -i 's/instance_group \[ { kind: KIND_GPU count: 2 gpus: \[ 0 \] } \]/instance_group [ { kind: KIND_GPU count: 1 gpus: [ 0 ] } ]/' model_repository/text_encoder/config.pbtxt
grep instance_group model_repository/text_encoder/config.pbtxt
LEVELS=16,64,256 MIN_REQUESTS=128 PA_LEVELS="16" CAMPAIGN_BUDGET_S=150 OUT=$OUT_ROOT/te1 bash perf/gpu_campaign.sh triton | tail -1
sed -i 's/instance_group \[ { kind: KIND_GPU count: 1 gpus: \[ 0 \] } \]/instance_group [ { kind: KIND_GPU count: 2 gpus: [ 0 ] } ]/' model_repository/text_encoder/config.pbtxt
export VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
timeout 110 build/out/venv/bin/python -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_triton_gpu.py > $OUT_ROOT/gpu_triton_tests.log 2>&1; tail -3 $OUT_ROOT/gpu_triton_tests.log
rm -f $OUT_ROOT/*/plots.png
for v in te2 te1; do echo "== $v"; sed -n '/^| concurrency/,/^$/p;/perf_analyzer/,$p' $OUT_ROOT/$v/summary.md; grep "text_encoder" $OUT_ROOT/$v/summary.md; done
