# The orphan guard on the GPU: tritonserver with the committed GPU configs killed mid-stream.
set -x
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" build/out/session/lib_main.so.xz build/out/lib/libvoxcpm_kernels.so
export VOXCPM_GIT_COMMIT=$(cat build/out/session/commit) VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so
OUT=/tmp/setup timeout 60 bash perf/gpu_campaign.sh _fn setup_venv > /tmp/setup.log 2>&1; echo "setup rc=$?"; tail -2 /tmp/setup.log
timeout 200 build/out/venv/bin/python build/out/session/gpu_kill_check.py 2>&1 | grep -v Warning | tail -12
tail -5 /tmp/srv/tritonserver.log
