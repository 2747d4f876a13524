#!/usr/bin/env bash
# Usage: build/tritonserver.sh [tritonserver options...]
#
# Starts the tritonserver that build/setup.sh installed on this repository's model_repository/.
# The script execs tritonserver, so the PID that started it is the server's (send it SIGTERM or
# SIGINT to stop it). It does not run build/setup.sh: run that first (build/demo.sh and
# build/test.sh do).
#
# Every option is passed to tritonserver unchanged. These defaults are added unless the same option
# is on the command line (as --opt=value or --opt value):
#   --model-repository   <repo>/model_repository
#   --backend-directory  <repo>/build/out/tritonserver/backends
#   --http-address, --grpc-address, --metrics-address   $TRITON_ADDRESS        (default 127.0.0.1)
#   --http-port          $TRITON_HTTP_PORT     (default 8000)
#   --grpc-port          $TRITON_GRPC_PORT     (default 8001)
#   --metrics-port       $TRITON_METRICS_PORT  (default 8002)
#   --model-config-name  $TRITON_MODEL_CONFIG_NAME; when unset: "cpu" where nvidia-smi lists no GPU
#                        (models then load configs/cpu.pbtxt where they have one), else none
#   --backend-config=python,shm-region-prefix-name=voxcpm_<pid>_   (so stale regions of killed
#                        servers can be told apart and removed at the next start, together with
#                        the ar_decoder's /dev/shm/voxcpm-backlog-<pid> and voxcpm-cancel-<pid>, the
#                        vocoder's voxcpm-acks-<pid> and the text_encoder's voxcpm-voices-<pid>)
# Which checkpoint is served: see README.md ("Serving a checkpoint"); the environment is passed
# to the models unchanged.
#
# VOXCPM_MPS=1 starts a private CUDA MPS control daemon first (pipe and log folders under
# build/out/mps/<pid>/) and serves under it: the ar_decoder's and the vocoder's processes then run
# kernels side by side instead of taking turns in time slices, which shortens the first chunk under
# steady load (perf/RESULTS.md run 48). The daemon outlives the server (this script execs it); the
# next start stops the daemons of servers that are gone, or stop it yourself with
# `CUDA_MPS_PIPE_DIRECTORY=build/out/mps/<pid>/pipe nvidia-cuda-mps-control <<< quit`. Leave it off
# where MPS is already set up for the whole node (the daemon's environment is then inherited).
# Under it the decoder also launches each step before booking the last (VOXCPM_LAUNCH_AHEAD=1 unless
# set): with the vocoder's kernels no longer waiting for a time slice, that served 17-20% more audio
# per second at 1, 16 and 64 streams (perf/RESULTS.md run 76). Without MPS it stays off: there the
# vocoder got less of the GPU and 64 streams served 16% less (run 30).
#
# Examples:
#   build/tritonserver.sh
#   TRITON_GRPC_PORT=9001 build/tritonserver.sh --log-verbose=1
#   build/tritonserver.sh --http-port 18000 --grpc-port 18001 --metrics-port 18002
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/build/out"
VENV="$OUT/venv"
BACKENDS="$OUT/tritonserver/backends"

if [ ! -x "$VENV/bin/python" ] || [ ! -x "$BACKENDS/python/triton_python_backend_stub" ]; then
    echo "tritonserver.sh: run build/setup.sh first ($VENV or $BACKENDS missing)" >&2
    exit 1
fi

read -r SITE PY_LIBDIR < <("$VENV/bin/python" -c \
    'import sysconfig; print(sysconfig.get_paths()["purelib"], sysconfig.get_config_var("LIBDIR"))')
SERVER="$SITE/pytriton/tritonserver/bin/tritonserver"

has_opt() {
    local want="$1" arg
    shift
    for arg in "$@"; do
        case "$arg" in "$want" | "$want"=*) return 0 ;; esac
    done
    return 1
}

DEFAULTS=()
add_default() { has_opt "$1" "${ARGS[@]}" || DEFAULTS+=("$1=$2"); }
ARGS=("$@")
ADDRESS="${TRITON_ADDRESS:-127.0.0.1}"
add_default --model-repository "$ROOT/model_repository"
add_default --backend-directory "$BACKENDS"
add_default --http-address "$ADDRESS"
add_default --grpc-address "$ADDRESS"
add_default --metrics-address "$ADDRESS"
add_default --http-port "${TRITON_HTTP_PORT:-8000}"
add_default --grpc-port "${TRITON_GRPC_PORT:-8001}"
add_default --metrics-port "${TRITON_METRICS_PORT:-8002}"

if [ -n "${TRITON_MODEL_CONFIG_NAME+set}" ]; then
    CONFIG_NAME="$TRITON_MODEL_CONFIG_NAME"
elif nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    CONFIG_NAME=""
else
    CONFIG_NAME="cpu"
fi
[ -z "$CONFIG_NAME" ] || add_default --model-config-name "$CONFIG_NAME"

# Python-backend shared-memory regions of a server that was killed stay in /dev/shm; ours carry the
# server's PID (this shell's PID, which exec hands to tritonserver), so remove those of dead PIDs.
# The ar_decoder's back-pressure counters and cancel board (voxcpm-backlog-<pid>, voxcpm-cancel-<pid>),
# the vocoder's decoded-window board (voxcpm-acks-<pid>) and the text_encoder's voices
# (voxcpm-voices-<pid>) carry the server's PID too, as do their holders' claims beside them
# (<name>.<suffix>, voxcpm_triton/serving/shared_map.py), which a clean stop removes with them.
for region in /dev/shm/voxcpm_*_* /dev/shm/voxcpm-backlog-* /dev/shm/voxcpm-cancel-* /dev/shm/voxcpm-acks-* \
              /dev/shm/voxcpm-voices-*; do
    [ -e "$region" ] || continue
    case "$region" in
        /dev/shm/voxcpm_*) pid="${region#/dev/shm/voxcpm_}"; pid="${pid%%_*}" ;;
        *) pid="${region##*-}"; pid="${pid%%.*}" ;;
    esac
    case "$pid" in '' | *[!0-9]*) continue ;; esac
    # /proc, not kill -0: another user's live server answers kill -0 with "not permitted". What is
    # not ours to remove (another user's, in the sticky /dev/shm) stays.
    [ -d "/proc/$pid" ] || rm -rf "$region" 2>/dev/null || true
done
# Private MPS daemons of servers that are gone (VOXCPM_MPS=1 below), named by the server's PID.
for folder in "$OUT"/mps/*/; do
    [ -d "$folder" ] || continue
    pid="$(basename "$folder")"
    case "$pid" in '' | *[!0-9]*) continue ;; esac
    kill -0 "$pid" 2>/dev/null && continue
    CUDA_MPS_PIPE_DIRECTORY="$folder/pipe" nvidia-cuda-mps-control <<< quit >/dev/null 2>&1 || true
    rm -rf "$folder"
done
if [ "${VOXCPM_MPS:-0}" = "1" ]; then
    if ! command -v nvidia-cuda-mps-control >/dev/null; then
        echo "tritonserver.sh: VOXCPM_MPS=1 needs nvidia-cuda-mps-control (the NVIDIA driver's utilities)" >&2
        exit 1
    fi
    export CUDA_MPS_PIPE_DIRECTORY="$OUT/mps/$$/pipe" CUDA_MPS_LOG_DIRECTORY="$OUT/mps/$$/log"
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    nvidia-cuda-mps-control -d
    export VOXCPM_LAUNCH_AHEAD="${VOXCPM_LAUNCH_AHEAD:-1}"
fi

if ! printf '%s\n' "${ARGS[@]}" | grep -q 'shm-region-prefix-name'; then
    DEFAULTS+=("--backend-config=python,shm-region-prefix-name=voxcpm_$$_")
fi

# The python backend starts its stub with the first python3 on PATH: the venv's, which has torch,
# numpy<2 and this package. The stub links the base interpreter's libpython; the server binary
# links the libraries bundled in nvidia_pytriton.libs.
export PATH="$VENV/bin:$PATH"
export LD_LIBRARY_PATH="$SITE/nvidia_pytriton.libs:$PY_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

exec "$SERVER" "${DEFAULTS[@]}" "${ARGS[@]}"
