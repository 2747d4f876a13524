set -x
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
OUT_ROOT=$OUT
OUT=$OUT_ROOT/served bash perf/gpu_campaign.sh setup
LEVELS=1,4,16,64,256 PA_LEVELS="16" CAMPAIGN_BUDGET_S=330 VOXCPM_GIT_COMMIT=$(cat build/out/session/commit) \
    OUT=$OUT_ROOT/served bash perf/gpu_campaign.sh triton
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
timeout 140 $P perf/ab_step.py --out /tmp/ab --variant a=VOXCPM_FP8=0 --variant b=VOXCPM_FP8=0 --batches 256,512 --repeats 2 \
    --no-throwaway --run-timeout-s 45
cat /tmp/ab/ab_step.md
tar czf $OUT_ROOT/ab.tgz -C /tmp ab
