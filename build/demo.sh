#!/usr/bin/env bash
# Usage: bash build/demo.sh ["text to speak"]
#
# Sets everything up (build/setup.sh, idempotent), starts tritonserver on model_repository/ serving
# the checkpoint VOXCPM_CHECKPOINT names (default: the tiny random-weight demo checkpoint, which
# speaks noise), streams the text through the `voxcpm` ensemble with the client into out.wav,
# printing the first-chunk latency and the real-time factor, then stops the server.
#
# Environment:
#   VOXCPM_CHECKPOINT=DIR   serve this checkpoint folder instead of the demo one
#   DEMO_OUT=FILE           WAV file to write (default out.wav in the repository root; a relative
#                           path is taken from the directory the demo was started in)
#   DEMO_MAX_SECONDS=S      stop the stream after S seconds of audio, rounded up to whole patches
#                           (160 ms; VoxCPM-0.5B's 80 ms; default 5: the random-weight demo
#                           checkpoint's stop head usually ends it after a few patches)
#   TRITON_*                ports/address/config name, as build/tritonserver.sh documents
#                           (the ports default to free ones here)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TEXT="${1:-Hello from VoxCPM, streaming through Triton Inference Server.}"
OUT_WAV="${DEMO_OUT:-$ROOT/out.wav}"
case "$OUT_WAV" in /*) ;; *) OUT_WAV="$PWD/$OUT_WAV" ;; esac
MAX_SECONDS="${DEMO_MAX_SECONDS:-5}"

bash "$ROOT/build/setup.sh"
# The server listens on loopback: never through an HTTP proxy that a machine reaching its package
# index through one may set for every address.
export no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}" NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"

PY="$ROOT/build/out/venv/bin/python"
LOG_DIR="$ROOT/build/out/demo"
mkdir -p "$LOG_DIR"
LOG="$LOG_DIR/tritonserver.log"

read -r FREE_HTTP FREE_GRPC FREE_METRICS < <("$PY" - <<'EOF'
import socket
socks = [socket.socket() for _ in range(3)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
EOF
)
export TRITON_HTTP_PORT="${TRITON_HTTP_PORT:-$FREE_HTTP}"
export TRITON_GRPC_PORT="${TRITON_GRPC_PORT:-$FREE_GRPC}"
export TRITON_METRICS_PORT="${TRITON_METRICS_PORT:-$FREE_METRICS}"

echo "[demo] starting tritonserver (gRPC 127.0.0.1:$TRITON_GRPC_PORT, log $LOG)"
# In a session of its own, so that Ctrl-C reaches the client alone: the client then ends its stream
# on the server (CANCEL_ID) and stop_server below stops an idle server at once. A server that got
# the same SIGINT began shutting down first, refused that cancel, and waited out its 30 s exit
# timeout on the stream's ensemble request (perf/RESULTS.md runs 67 and 73).
SESSION=()
command -v setsid > /dev/null && SESSION=(setsid)
"${SESSION[@]}" bash "$ROOT/build/tritonserver.sh" > "$LOG" 2>&1 &
SERVER_PID=$!

stop_server() {
    if kill -0 "$SERVER_PID" 2>/dev/null; then
        echo "[demo] stopping tritonserver"
        kill -TERM "$SERVER_PID" 2>/dev/null || true
        for _ in $(seq 60); do
            kill -0 "$SERVER_PID" 2>/dev/null || break
            sleep 0.5
        done
        kill -KILL "$SERVER_PID" 2>/dev/null || true
    fi
    wait "$SERVER_PID" 2>/dev/null || true
}
trap stop_server EXIT

STARTED=$(date +%s)
"$PY" - "$TRITON_HTTP_PORT" "$SERVER_PID" <<'EOF' || { echo "[demo] tritonserver did not become ready; last lines of $LOG:" >&2; tail -n 40 "$LOG" >&2; exit 1; }
import sys, time, urllib.request
from voxcpm_triton.serving.shared_map import process_alive
port, pid = sys.argv[1], int(sys.argv[2])

deadline = time.monotonic() + 300
while time.monotonic() < deadline:
    if not process_alive(pid):  # one that exited stays a zombie until this script's shell reaps it
        sys.exit(1)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=2) as reply:
            if reply.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.5)
sys.exit(1)
EOF
echo "[demo] tritonserver ready after $(( $(date +%s) - STARTED )) s"

echo "[demo] streaming: \"$TEXT\""
(cd "$ROOT" && "$PY" -m client "$TEXT" -o "$OUT_WAV" --url "127.0.0.1:$TRITON_GRPC_PORT" \
    --max-seconds "$MAX_SECONDS" --seed 0)
