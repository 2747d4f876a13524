# Served with and without a private CUDA MPS daemon, same machine, same call.
set -x
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
OUT_ROOT=$OUT
export VOXCPM_GIT_COMMIT=$(cat build/out/session/commit)
OUT=$OUT_ROOT/plain bash perf/gpu_campaign.sh setup > /dev/null
LEVELS=16,64,256 PA_LEVELS="" CAMPAIGN_BUDGET_S=150 OUT=$OUT_ROOT/plain bash perf/gpu_campaign.sh triton | tail -3
mkdir -p /tmp/mps/pipe /tmp/mps/log
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps/log
nvidia-cuda-mps-control -d && echo "mps daemon up"
LEVELS=16,64,256 PA_LEVELS="" CAMPAIGN_BUDGET_S=150 OUT=$OUT_ROOT/mps bash perf/gpu_campaign.sh triton | tail -3
cp /tmp/mps/log/control.log $OUT_ROOT/mps_control.log 2>/dev/null
echo quit | nvidia-cuda-mps-control
sed -n '/^| concurrency/,/^$/p;/engine thread/,/^$/p' $OUT_ROOT/plain/summary.md $OUT_ROOT/mps/summary.md
