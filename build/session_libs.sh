#!/usr/bin/env bash
# Builds the kernel libraries a device call's A/B carries into build/out/session (perf/device_call_env.sh
# unpacks them there): lib.so.xz from this working tree, and one lib_NAME.so.xz per variant, each from
# a temporary worktree of HEAD with the variant's patches applied (git am) or at a past commit. Also
# writes build/out/session/commit. For sm_90 only, with the Hopper-only ops required, as a timing
# library must be.
# Usage: bash build/session_libs.sh [NAME=PATCH[,PATCH...] | NAME=@COMMIT] ...
#   e.g. bash build/session_libs.sh gram=perf/results/gpu-2026-12-07-run121/skinny_gram.patch prev=@caf4925
# Needs nvcc and build/out/cutlass (bash build/setup.sh). ~40 s a library on two cores.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
SESSION=$ROOT/build/out/session
export VOXCPM_CUDA_ARCHS=90 VOXCPM_REQUIRE_SM90=1
export VOXCPM_CUTLASS_INCLUDE=${VOXCPM_CUTLASS_INCLUDE:-$ROOT/build/out/cutlass/cutlass_library/source/include}
[ -d "$VOXCPM_CUTLASS_INCLUDE" ] || { echo "session_libs: no CUTLASS at $VOXCPM_CUTLASS_INCLUDE (bash build/setup.sh)" >&2; exit 2; }
mkdir -p "$SESSION"
WORK=$(mktemp -d)
trap 'for tree in "$WORK"/tree_*; do [ -d "$tree" ] && git -C "$ROOT" worktree remove --force "$tree"; done; rm -rf "$WORK"' EXIT

build() {  # TREE NAME: builds TREE's kernels and packs them as build/out/session/NAME.so.xz
    bash "$1/build/build_kernels.sh" "$WORK/lib_$2" > "$WORK/$2.log" 2>&1 || { cat "$WORK/$2.log" >&2; exit 1; }
    xz -T0 -c "$WORK/lib_$2/libvoxcpm_kernels.so" > "$SESSION/$2.so.xz"
    echo "session_libs: $SESSION/$2.so.xz ($(git -C "$1" log --oneline -1 | cut -c1-60))"
}

build "$ROOT" lib
git -C "$ROOT" rev-parse HEAD > "$SESSION/commit"
for spec in "$@"; do
    name=${spec%%=*}
    source=${spec#*=}
    tree=$WORK/tree_$name
    if [ "${source:0:1}" = @ ]; then
        git -C "$ROOT" worktree add -q --detach "$tree" "${source:1}"
    else
        git -C "$ROOT" worktree add -q --detach "$tree" HEAD
        IFS=, read -r -a patches <<< "$source"
        for patch in "${patches[@]}"; do
            git -C "$tree" -c user.name=session_libs -c user.email=session_libs@localhost am -q "$ROOT/$patch"
        done
    fi
    build "$tree" "lib_$name"
done
