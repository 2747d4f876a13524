# Sourced by a device call's script (perf/results/*/callN.sh), from the repository root on the
# device machine: what every such call needs before its commands, so each script holds only what it
# measures. The call carries build/out/session with lib.so.xz (the kernels library, built on the CPU
# machine: VOXCPM_CUDA_ARCHS=90 bash build/build_kernels.sh DIR, then xz) and commit (git rev-parse
# HEAD of the tree sent). A call that measures a kernel change carries that library too and names
# it in LIB (default build/out/session/lib.so.xz) before sourcing this.
# Sets: P (the image's Python with CUDA torch), T0 (the start, in seconds); exports PYTHONPATH,
# VOXCPM_KERNELS_LIB, VOXCPM_GIT_COMMIT, PYTHONUNBUFFERED; defines at NAME RC (prints what ended
# and when) and left LIMIT (seconds left of LIMIT since T0). Prints the GPU's name.
P=/opt/torch/.venv/bin/python3
mkdir -p build/out/lib
$P -c "import lzma,sys; open(sys.argv[2],'wb').write(lzma.open(sys.argv[1]).read())" \
  "${LIB:-build/out/session/lib.so.xz}" build/out/lib/libvoxcpm_kernels.so
export PYTHONPATH=$PWD VOXCPM_KERNELS_LIB=$PWD/build/out/lib/libvoxcpm_kernels.so PYTHONUNBUFFERED=1
export VOXCPM_GIT_COMMIT=$(cat build/out/session/commit 2>/dev/null)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T0=$(date +%s)
at() { echo "$1 rc=$2 at $(( $(date +%s) - T0 )) s"; }
left() { echo $(( $1 - ($(date +%s) - T0) )); }
