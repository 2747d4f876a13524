#!/usr/bin/env bash
# Builds the CUDA ops library build/out/lib/libvoxcpm_kernels.so with plain nvcc (no torch, no CMake).
# Usage: build/build_kernels.sh [OUTPUT_DIR]
# Environment:
#   VOXCPM_CUDA_ARCHS="90 80 89"  compute capabilities to emit machine code for (the first one also
#                                 gets PTX, so newer GPUs can JIT it); "90" alone builds faster
#   NVCC=/path/to/nvcc            compiler (default: nvcc on PATH, else $CUDA_HOME/bin/nvcc,
#                                 CUDA_HOME defaulting to /usr/local/cuda)
#   JOBS=N                        parallel compile jobs (default: number of cores)
#   VOXCPM_PTXAS_VERBOSE=1        print ptxas' registers / shared memory / spills per kernel
#   VOXCPM_CUTLASS_INCLUDE=DIR    CUTLASS's headers (default: build/out/cutlass, which build/setup.sh
#                                 installs); the *_sm90.cu ops need them and an sm_90 target, and
#                                 are built without their kernels (reporting "not supported") else
#   VOXCPM_REQUIRE_SM90=1         fail instead of building them without their kernels: a library
#                                 meant for timing on a Hopper GPU (perf/device_call_env.sh)
# Exits 0 without building when no nvcc is found: the ops then run their PyTorch reference path.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="${1:-$ROOT/build/out/lib}"
SRC_DIR="$ROOT/kernels"

NVCC="${NVCC:-$(command -v nvcc || true)}"
CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
if [ -z "$NVCC" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then NVCC="$CUDA_HOME/bin/nvcc"; fi
if [ -z "$NVCC" ]; then
    echo "build_kernels: nvcc not found; skipping the CUDA kernels library (ops use their PyTorch reference)"
    exit 0
fi

read -r -a ARCHS <<< "${VOXCPM_CUDA_ARCHS:-90 80 89}"
GENCODE=()
for arch in "${ARCHS[@]}"; do
    case "$arch" in
        ''|*[!0-9a]*) echo "build_kernels: bad compute capability '$arch' in VOXCPM_CUDA_ARCHS" >&2; exit 2 ;;
    esac
    GENCODE+=("-gencode=arch=compute_${arch},code=sm_${arch}")
done
GENCODE+=("-gencode=arch=compute_${ARCHS[0]},code=compute_${ARCHS[0]}")

FLAGS=(-O3 -std=c++17 -lineinfo -Xcompiler -fPIC,-fvisibility=hidden -I "$SRC_DIR" "${GENCODE[@]}")
if [ "${VOXCPM_PTXAS_VERBOSE:-0}" = 1 ]; then FLAGS+=(-Xptxas -v); fi
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"

OBJ_DIR="$(mktemp -d)"
trap 'rm -rf "$OBJ_DIR"' EXIT
mkdir -p "$OUT_DIR"

# Hopper-only ops (CUTLASS's wgmma / TMA kernels) compile for sm_90a alone, in the background while
# the rest build; NDEBUG because an assert's call in a kernel makes ptxas serialize its wgmma.
CUTLASS_INCLUDE="${VOXCPM_CUTLASS_INCLUDE:-$ROOT/build/out/cutlass/cutlass_library/source/include}"
SM90_SOURCES=("$SRC_DIR"/*_sm90.cu)
SM90_FLAGS=("${FLAGS[@]}")
SM90_NOTE="without their kernels (no sm_90 target)"
if [[ " ${ARCHS[*]} " == *" 90 "* || " ${ARCHS[*]} " == *" 90a "* ]]; then
    if [ -f "$CUTLASS_INCLUDE/cutlass/cutlass.h" ]; then
        SM90_FLAGS=(-O3 -std=c++17 -lineinfo -DNDEBUG -Xcompiler -fPIC,-fvisibility=hidden -I "$SRC_DIR"
                    -I "$CUTLASS_INCLUDE" -DVOXCPM_CUTLASS_SM90 --expt-relaxed-constexpr
                    -gencode=arch=compute_90a,code=sm_90a)
        if [ "${VOXCPM_PTXAS_VERBOSE:-0}" = 1 ]; then SM90_FLAGS+=(-Xptxas -v); fi
        SM90_NOTE="with CUTLASS ($CUTLASS_INCLUDE)"
    else
        SM90_NOTE="without their kernels (no CUTLASS headers at $CUTLASS_INCLUDE)"
    fi
fi

echo "build_kernels: $("$NVCC" --version | tail -1) archs=${ARCHS[*]} jobs=$JOBS -> $OUT_DIR"
echo "build_kernels: Hopper-only ops ${SM90_NOTE}"
if [ "${VOXCPM_REQUIRE_SM90:-0}" = 1 ] && [[ "$SM90_NOTE" != "with CUTLASS"* ]]; then
    echo "build_kernels: VOXCPM_REQUIRE_SM90=1 and the Hopper-only ops would lack their kernels" >&2
    exit 1
fi
sm90_pids=()
for src in "${SM90_SOURCES[@]}"; do
    "$NVCC" "${SM90_FLAGS[@]}" -c "$src" -o "$OBJ_DIR/$(basename "$src" .cu).o" &
    sm90_pids+=("$!")
done
export NVCC OBJ_DIR
printf '%s\n' "$SRC_DIR"/*.cu | grep -v '_sm90\.cu$' | xargs -P "$JOBS" -I{} bash -c \
    'src="$1"; shift; "$NVCC" "$@" -c "$src" -o "$OBJ_DIR/$(basename "$src" .cu).o" || exit 255' _ {} "${FLAGS[@]}"
for pid in "${sm90_pids[@]}"; do wait "$pid"; done

# Link into a temporary name first so a failed build never leaves a half-written library behind.
"$NVCC" -shared "${GENCODE[@]}" -o "$OUT_DIR/libvoxcpm_kernels.so.tmp" "$OBJ_DIR"/*.o
mv -f "$OUT_DIR/libvoxcpm_kernels.so.tmp" "$OUT_DIR/libvoxcpm_kernels.so"
echo "build_kernels: wrote $OUT_DIR/libvoxcpm_kernels.so"
