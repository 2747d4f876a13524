#!/usr/bin/env bash
# Sets up everything the server, the demo and the tests need, under build/out/ (git-ignored):
#   build/out/venv                      Python venv: torch, numpy<2, tritonserver (nvidia-pytriton),
#                                       tritonclient + perf_analyzer, this package (editable)
#   build/out/tritonserver/backends     Triton backends dir: python backend + the stub for the venv's Python
#   build/out/lib/lib{b64,cudart}*     sonames perf_analyzer looks for (bundled by nvidia-pytriton)
#   build/out/lib/libvoxcpm_kernels.so  CUDA kernels library (where nvcc and a GPU exist; build/build_kernels.sh)
#   build/out/cutlass                   CUTLASS's headers (where nvcc exists), for the Hopper-only kernels
#   build/out/checkpoints/voxcpm2-tiny  deterministic random-weight demo checkpoint
# Idempotent: each step records a hash of its inputs and is skipped when they have not changed.
#
# Environment:
#   PYTHON=/path/to/python3.X   interpreter for the venv (3.10-3.12; default: python3 on PATH)
#   PIP_FIND_LINKS / PIP_NO_INDEX etc.  honoured by pip as usual (offline GPU machines: a wheel folder)
#   VOXCPM_SKIP_KERNELS=1       do not build the kernels library even where nvcc and a GPU exist
#   VOXCPM_BUILD_KERNELS=1      build it where nvcc exists but no GPU is visible (compile check)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "$ROOT" in
    *[[:space:]]*)
        # Triton's Python backend starts each model's stub through a shell command line with the
        # model's path unquoted: no model of a repository under such a path would load.
        echo "setup: the repository's path '$ROOT' contains whitespace, which tritonserver's Python" \
             "backend cannot start models from; clone it to a path without spaces" >&2
        exit 1 ;;
esac
OUT="$ROOT/build/out"
VENV="$OUT/venv"
STAMPS="$OUT/stamps"
mkdir -p "$OUT" "$STAMPS"

log() { printf '[setup] %s\n' "$*"; }

# hash_of FILE_OR_TEXT...: one hash over the given files' contents and literal strings.
hash_of() {
    local item
    for item in "$@"; do
        if [ "${item#/}" != "$item" ] && [ -f "$item" ]; then cat "$item"; else printf '%s\n' "$item"; fi
    done | sha256sum | cut -d' ' -f1
}
stamp_ok() { [ -f "$STAMPS/$1" ] && [ "$(cat "$STAMPS/$1")" = "$2" ]; }
stamp_set() { printf '%s\n' "$2" > "$STAMPS/$1"; }

# ---------------------------------------------------------------- interpreter
PY="${PYTHON:-python3}"
command -v "$PY" >/dev/null || { echo "setup: $PY not found; set PYTHON=/path/to/python3.10-3.12" >&2; exit 1; }
PY_VER="$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
case "$PY_VER" in
    3.10|3.11|3.12) ;;
    *) echo "setup: $PY is Python $PY_VER; need 3.10-3.12 (set PYTHON=...)" >&2; exit 1 ;;
esac

# The python backend stub links libpython3.X.so.1.0 (build/tritonserver.sh puts LIBDIR on the path).
PY_LIBDIR="$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')"
if [ ! -e "$PY_LIBDIR/libpython$PY_VER.so.1.0" ] && ! ldconfig -p 2>/dev/null | grep -q "libpython$PY_VER.so.1.0"; then
    echo "setup: Triton's python backend needs libpython$PY_VER.so.1.0, which $PY lacks; install" \
        "libpython$PY_VER (Debian/Ubuntu) or use a Python built with --enable-shared (PYTHON=...)" >&2
    exit 1
fi

# A CUDA torch already installed for this interpreter (GPU machines) is reused instead of installing
# one: its site-packages folder is appended to the venv through a .pth file, so the venv's own
# numpy 1.26 and transformers<5 still come first on sys.path.
HOST_TORCH_DIR="$("$PY" - <<'EOF' 2>/dev/null || true
import os
try:
    import torch
except Exception:
    raise SystemExit(0)
if torch.version.cuda:
    print(os.path.dirname(os.path.dirname(torch.__file__)))
EOF
)"

# ---------------------------------------------------------------- venv + packages
REQS=(
    "numpy==1.26.4"                # the python backend of Triton 24.10 breaks silently with numpy 2
    "nvidia-pytriton==0.7.0"       # real tritonserver 2.51 + python backend + stubs
    "tritonclient[all]==2.51.0"    # last wheel that ships a working perf_analyzer
    "safetensors" "soundfile" "tokenizers" "pytest" "einops" "pydantic" "transformers<5"
    "soxr==1.1.0"                  # VoxCPM2 prompts at other rates, resampled as librosa does for the reference
    "wetext" "inflect"             # NORMALIZE (text.spoken_form): the reference's grammars, ~7 MB of wheels
)
# The checkout's path is part of the key: the venv's scripts and its editable install of this package
# point at it, so a moved or copied checkout would otherwise run the old one's code.
VENV_KEY="$(hash_of "$PY_VER" "$HOST_TORCH_DIR" "${REQS[@]}" "voxcpm==2.0.3" "$ROOT/pyproject.toml" "$ROOT")"
if [ -x "$VENV/bin/python" ] && stamp_ok venv "$VENV_KEY"; then
    log "venv up to date ($VENV)"
else
    log "creating venv with $PY (Python $PY_VER) at $VENV"
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    # This machine's pip configuration lists local indexes that lack most names; pip warns about each.
    pip_install() {
        "$VENV/bin/python" -m pip --disable-pip-version-check install -q "$@" \
            2> >(grep -v '^WARNING: Location' >&2)
    }
    SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
    if [ -n "$HOST_TORCH_DIR" ]; then
        log "reusing the CUDA torch in $HOST_TORCH_DIR"
        printf '%s\n' "$HOST_TORCH_DIR" > "$SITE/zz_host_torch.pth"
    else
        # Prefer a torch wheel lying on local disk (pip's find-links); without one, PyTorch's CPU
        # index (PyPI's Linux wheel is the CUDA build, several GB with its nvidia-* packages), and
        # only where that cannot be reached PyPI itself.
        log "installing torch==2.13.0"
        pip_install --no-index torch==2.13.0 2>/dev/null \
            || pip_install --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 2>/dev/null \
            || pip_install torch==2.13.0
    fi
    log "installing tritonserver, tritonclient and the Python dependencies"
    pip_install --prefer-binary "${REQS[@]}"
    # The reference implementation (parity tests only); its own dependency pins would drag in
    # packages the server does not use.
    pip_install --no-deps "voxcpm==2.0.3"
    pip_install --no-deps -e "$ROOT"
    "$VENV/bin/python" -c 'import torch, numpy; assert numpy.__version__.startswith("1."), numpy.__version__'
    stamp_set venv "$VENV_KEY"
fi

# ---------------------------------------------------------------- tritonserver backends
SITE="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
TRITON_HOME="$SITE/pytriton/tritonserver"
BACKENDS="$OUT/tritonserver/backends"
STUB="$TRITON_HOME/python_backend_stubs/$PY_VER/triton_python_backend_stub"
[ -f "$STUB" ] || { echo "setup: no python backend stub for Python $PY_VER in $TRITON_HOME" >&2; exit 1; }
BACKEND_KEY="$(hash_of "$VENV_KEY" "$TRITON_HOME/backends/python/libtriton_python.so" "$STUB")"
if stamp_ok backends "$BACKEND_KEY" && [ -x "$BACKENDS/python/triton_python_backend_stub" ]; then
    log "tritonserver backends up to date ($BACKENDS)"
else
    log "preparing tritonserver backends in $BACKENDS"
    rm -rf "$BACKENDS"
    mkdir -p "$BACKENDS"
    cp -r "$TRITON_HOME/backends/python" "$BACKENDS/python"
    rm -rf "$BACKENDS/python/__pycache__"
    # The python backend starts the stub that sits next to its library; the stub must match the
    # Python that runs the models (the venv's).
    cp "$STUB" "$BACKENDS/python/triton_python_backend_stub"
    # Wheels unpacked by hand lose exec bits; pip keeps them, but make sure either way.
    chmod +x "$BACKENDS/python/triton_python_backend_stub" "$TRITON_HOME/bin/tritonserver"
    stamp_set backends "$BACKEND_KEY"
fi

# perf_analyzer (tritonclient wheel) links libb64.so.0d and libcudart.so.12; nvidia-pytriton bundles
# both under hashed names. Give them their sonames in one folder (build/perf_analyzer.sh uses it).
LIBS="$SITE/nvidia_pytriton.libs"
mkdir -p "$OUT/lib"
ln -sfn "$(ls "$LIBS"/libb64-*.so.0d | head -n1)" "$OUT/lib/libb64.so.0d"
ln -sfn "$(ls "$LIBS"/libcudart-*.so.12* | head -n1)" "$OUT/lib/libcudart.so.12"

# ---------------------------------------------------------------- CUTLASS headers
# Only the headers of NVIDIA's wheel (its Python parts and their dependencies are not used): the
# Hopper GEMMs in kernels/*_sm90.cu build on CUTLASS's collectives. Wherever nvcc is, so that the
# compile check in tests/cpu/test_kernels_build.py covers them too.
CUTLASS_VERSION="4.2.0.0"
if [ "${VOXCPM_SKIP_KERNELS:-0}" != 1 ] && command -v nvcc >/dev/null; then
    CUTLASS_HEADER="$OUT/cutlass/cutlass_library/source/include/cutlass/cutlass.h"
    if stamp_ok cutlass "$CUTLASS_VERSION" && [ -f "$CUTLASS_HEADER" ]; then
        log "CUTLASS headers up to date ($OUT/cutlass)"
    else
        log "installing CUTLASS $CUTLASS_VERSION's headers into $OUT/cutlass"
        rm -rf "$OUT/cutlass"
        if "$VENV/bin/python" -m pip --disable-pip-version-check install -q --no-deps --no-compile \
                --target "$OUT/cutlass" "nvidia-cutlass==$CUTLASS_VERSION" 2> >(grep -v '^WARNING: Location' >&2); then
            stamp_set cutlass "$CUTLASS_VERSION"
        else
            log "CUTLASS not installed: the kernels library builds without its Hopper-only GEMMs"
        fi
    fi
fi

# ---------------------------------------------------------------- CUDA kernels library
if [ "${VOXCPM_SKIP_KERNELS:-0}" = 1 ]; then
    log "kernels: skipped (VOXCPM_SKIP_KERNELS=1)"
elif ! command -v nvcc >/dev/null; then
    log "kernels: skipped (no nvcc on PATH; the ops use their PyTorch reference path)"
elif [ ! -f "$ROOT/build/build_kernels.sh" ]; then
    log "kernels: skipped (build/build_kernels.sh not present)"
elif [ "${VOXCPM_BUILD_KERNELS:-0}" != 1 ] && ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    # CPU tensors always take the PyTorch path, so without a GPU the library would go unused (and
    # tests/cpu/test_kernels_build.py compiles it anyway); skipping saves CI over a minute.
    log "kernels: skipped (no GPU visible; VOXCPM_BUILD_KERNELS=1 builds anyway)"
else
    KERNELS_KEY="$(hash_of "$ROOT/build/build_kernels.sh" $(find "$ROOT/kernels" -type f 2>/dev/null | sort) "$(command -v nvcc)")"
    # A forced build without a GPU is only a compile check: one architecture is enough there.
    ARCHS="${VOXCPM_CUDA_ARCHS:-}"
    if [ -z "$ARCHS" ] && ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then ARCHS=90; fi
    KERNELS_KEY="$(hash_of "$KERNELS_KEY" "$ARCHS" "cutlass $(cat "$STAMPS/cutlass" 2>/dev/null)")"
    if stamp_ok kernels "$KERNELS_KEY" && [ -f "$OUT/lib/libvoxcpm_kernels.so" ]; then
        log "kernels library up to date ($OUT/lib/libvoxcpm_kernels.so)"
    elif stamp_ok kernels_failed "$KERNELS_KEY"; then
        log "kernels: not built (the last build from these sources failed: $OUT/kernels_build.log;" \
            "rm $STAMPS/kernels_failed to try again)"
    else
        log "building the kernels library (build/build_kernels.sh${ARCHS:+, archs $ARCHS})"
        if [ -n "$ARCHS" ]; then export VOXCPM_CUDA_ARCHS="$ARCHS"; fi
        # Every op has its PyTorch path, so a library that does not build (an nvcc too old for
        # these architectures, say) costs speed, not the server or the tests: say so loudly and go on.
        if bash "$ROOT/build/build_kernels.sh" "$OUT/lib" > "$OUT/kernels_build.log" 2>&1; then
            stamp_set kernels "$KERNELS_KEY"
            log "kernels library built ($OUT/lib/libvoxcpm_kernels.so, log $OUT/kernels_build.log)"
        else
            stamp_set kernels_failed "$KERNELS_KEY"
            rm -f "$OUT/lib/libvoxcpm_kernels.so"
            log "WARNING: the kernels library did not build (last lines of $OUT/kernels_build.log below);" \
                "the ops run their PyTorch path, much slower on a GPU"
            tail -n 15 "$OUT/kernels_build.log" >&2
        fi
    fi
fi

# ---------------------------------------------------------------- demo checkpoint
CKPT="$OUT/checkpoints/voxcpm2-tiny"
# The generator's output depends on the model/audio/text code (parameter names and shapes), so any
# change in the package regenerates it; it takes seconds.
CKPT_KEY="$(hash_of "$VENV_KEY" $(find "$ROOT/voxcpm_triton" -name '*.py' -type f | sort))"
if [ -f "$CKPT/config.json" ] && stamp_ok checkpoint "$CKPT_KEY"; then
    log "demo checkpoint up to date ($CKPT)"
else
    log "making the demo checkpoint at $CKPT"
    rm -rf "$CKPT.tmp" "$CKPT"
    mkdir -p "$(dirname "$CKPT")"
    "$VENV/bin/python" -m voxcpm_triton.checkpoint.make --variant voxcpm2 --size tiny --out "$CKPT.tmp" >/dev/null
    mv "$CKPT.tmp" "$CKPT"
    stamp_set checkpoint "$CKPT_KEY"
fi

log "done"
