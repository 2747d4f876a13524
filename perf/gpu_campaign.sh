#!/usr/bin/env bash
# The H200 benchmark campaign: every system on the same GPU, the same random full-size VoxCPM2 bf16
# checkpoint, the same texts and the same forced length (perf/README.md says how each is driven).
#
#   OUT=/where/results/go bash perf/gpu_campaign.sh [PART...]
#   PARTS: setup ours triton nano reference report     (default: all of them, in that order)
#   setup is implied by every other part and is skipped when already done on this machine.
#
# Needs build/out/device/ from build/device_bundle.sh (carry it). Every part runs in its own time box
# and its own process group; a part that fails or runs out of time is logged and the next one runs.
# The whole campaign stops starting parts when CAMPAIGN_BUDGET_S (default 560) is nearly spent, so it
# fits one 10-minute device call. All parts need more than one call (setup ~1-2 min, ours ~3, triton
# ~5-7, nano ~4, reference ~3): run `ours triton` in one call and `nano reference` in the next.
# $OUT receives at most 4 files (the device returns at most 8): campaign.log, summary.md, plots.png
# and results.tar.gz (every sweep JSON, perf_analyzer export and per-part log).
#
# Environment: VOXCPM_GIT_COMMIT (the tree travels without .git), CAMPAIGN_BUDGET_S, PATCHES (50),
# MIN_REQUESTS (8 per level), LEVELS (1,4,16,64,128,256), REFERENCE_LEVELS (1,4,16), PA_LEVELS
# ("1 16"), HOST_PYTHON (/opt/torch/.venv/bin/python3: the image's Python with CUDA torch),
# TRITON_{HTTP,GRPC,METRICS}_PORT (8000-8002, as build/tritonserver.sh), PYSPY (a py-spy binary:
# profile the served part's Python processes, see start_pyspy).
# Dry run on a CPU machine with build/setup.sh's venv: create build/out/campaign/setup.done, then
# CAMPAIGN_DEVICE=cpu CAMPAIGN_SIZE=tiny (perf/README.md has the whole command).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SELF=$ROOT/perf/gpu_campaign.sh
: "${OUT:?set OUT to the folder results go to}"
START=$(date +%s)
DEADLINE=$((START + ${CAMPAIGN_BUDGET_S:-560}))
RESERVE=15  # seconds kept for the report and the tarball
PATCHES=${PATCHES:-50}
MIN_REQUESTS=${MIN_REQUESTS:-8}
LEVELS=${LEVELS:-1,4,16,64,128,256}
REFERENCE_LEVELS=${REFERENCE_LEVELS:-1,4,16}
PA_LEVELS=${PA_LEVELS:-1 16}
HOST_PYTHON=${HOST_PYTHON:-/opt/torch/.venv/bin/python3}
BUNDLE=$ROOT/build/out/device
WORK=$ROOT/build/out/campaign
VENV=$ROOT/build/out/venv
DEVICE=${CAMPAIGN_DEVICE:-cuda}
SIZE=${CAMPAIGN_SIZE:-full}
CKPT=$WORK/checkpoints/voxcpm2-$SIZE
RES=$WORK/results
LOGS=$RES/logs
mkdir -p "$OUT" "$RES" "$LOGS"
export VOXCPM_GIT_COMMIT=${VOXCPM_GIT_COMMIT:-$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)}
export PYTHONUNBUFFERED=1

log() { printf '[campaign %4ds] %s\n' "$(($(date +%s) - START))" "$*" | tee -a "$OUT/campaign.log"; }

# run_part NAME SECONDS CMD...: CMD in its own session, time-boxed, output in $LOGS/NAME.log; the whole
# process group is killed afterwards (nano's worker process, compile workers, a server).
run_part() {
    local name=$1 secs=$2 left rc
    shift 2
    left=$((DEADLINE - $(date +%s) - RESERVE))
    [ "$secs" -gt "$left" ] && secs=$left
    if [ "$secs" -lt 20 ]; then
        log "$name: skipped, only ${left}s of the budget left"
        return 1
    fi
    log "$name: start (time box ${secs}s)"
    setsid timeout -k 5 "$secs" "$@" >"$LOGS/$name.log" 2>&1 &
    local pid=$!
    wait "$pid"
    rc=$?
    kill -TERM -- "-$pid" 2>/dev/null
    sleep 1
    kill -KILL -- "-$pid" 2>/dev/null
    [ "$rc" = 124 ] && log "$name: TIMED OUT after ${secs}s" || log "$name: exit $rc"
    tail -n 3 "$LOGS/$name.log" | sed "s/^/[$name] /" | tee -a "$OUT/campaign.log"
    return "$rc"
}

gpu_snapshot() { nvidia-smi --query-gpu=name,memory.used,memory.total,utilization.gpu --format=csv,noheader 2>/dev/null; }

# ------------------------------------------------------------------------------------------ setup
# A venv over the image's Python whose own site-packages (numpy 1.26, tritonclient, the baselines)
# come before the image's (torch 2.11+cu130, transformers, ...), appended through a .pth file; laid
# out the way build/tritonserver.sh and build/perf_analyzer.sh expect build/out/ to be.
setup_venv() {
    [ -f "$WORK/setup.done" ] && return 0
    [ -d "$BUNDLE/wheels" ] || { echo "no $BUNDLE: run build/device_bundle.sh here and carry build/out/device"; return 1; }
    rm -rf "$VENV" "$WORK/tritonserver"
    "$HOST_PYTHON" -m venv --without-pip "$VENV" || return 1
    local site host_site
    site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    host_site=$("$HOST_PYTHON" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))') || return 1
    local wheels=$WORK/wheels packed
    rm -rf "$wheels" && mkdir -p "$wheels" && cp "$BUNDLE"/wheels/*.whl "$wheels"/ || return 1
    for packed in "$BUNDLE"/wheels/*.whl.tar.xz; do
        [ -e "$packed" ] || continue
        "$HOST_PYTHON" "$ROOT/build/wheel_xz.py" unpack "$packed" "$wheels" >/dev/null || return 1
    done
    "$HOST_PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$site" "$wheels"/*.whl || return 1
    printf '%s\n' "$host_site" >"$site/zz_host_site.pth"
    printf '%s\n' "$ROOT" >"$site/voxcpm_triton_repo.pth"
    # Python's tarfile, not tar -J: the image may lack the xz program; filter "tar" keeps modes and links.
    "$HOST_PYTHON" -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="tar")' \
        "$BUNDLE/tritonserver.tar.xz" "$WORK" || return 1
    mkdir -p "$site/pytriton/tritonserver" "$ROOT/build/out/tritonserver/backends" "$ROOT/build/out/lib"
    ln -sfn "$WORK/tritonserver/bin" "$site/pytriton/tritonserver/bin"
    ln -sfn "$WORK/tritonserver/lib" "$site/nvidia_pytriton.libs"
    rm -rf "$ROOT/build/out/tritonserver/backends/python"
    cp -r "$WORK/tritonserver/backends/python" "$ROOT/build/out/tritonserver/backends/python"
    ln -sfn "$WORK/tritonserver/bin/perf_analyzer" "$VENV/bin/perf_analyzer"
    ln -sfn "$WORK/tritonserver/lib/libb64.so.0d" "$ROOT/build/out/lib/libb64.so.0d"
    ln -sfn "$WORK/tritonserver/lib/libcudart.so.12" "$ROOT/build/out/lib/libcudart.so.12"
    "$VENV/bin/python" -c 'import numpy, torch, tritonclient.grpc, voxcpm_triton, perf
assert numpy.__version__.startswith("1."), numpy.__version__
print("venv ok: torch", torch.__version__, "cuda", torch.cuda.is_available(), "numpy", numpy.__version__)' || return 1
    touch "$WORK/setup.done"
}

make_checkpoint() {
    [ -f "$CKPT/done" ] && return 0
    rm -rf "$CKPT"
    "$VENV/bin/python" -m voxcpm_triton.checkpoint.make --variant voxcpm2 --size "$SIZE" --out "$CKPT" || return 1
    "$VENV/bin/python" -m perf.force_length "$CKPT" || return 1
    du -sh "$CKPT"
    touch "$CKPT/done"
}

setup() {
    if [ -f "$WORK/setup.done" ] && [ -f "$CKPT/done" ]; then
        log "setup: already done on this machine"
        return 0
    fi
    log "GPU: $(gpu_snapshot)"
    run_part setup_venv 120 bash "$SELF" _fn setup_venv && run_part checkpoint 240 bash "$SELF" _fn make_checkpoint
}

# ------------------------------------------------------------------------------------------ parts
part_ours() {
    run_part ours_inprocess 200 "$VENV/bin/python" -m perf.inprocess_bench --checkpoint "$CKPT" --device "$DEVICE" \
        --out "$RES/ours_inprocess.json" --levels "$LEVELS" --patches "$PATCHES" --min-requests "$MIN_REQUESTS" --budget-s 150
}

wait_ready() {  # wait_ready PID SECONDS
    "$VENV/bin/python" - "$1" "$2" <<'EOF'
import os, sys, time, urllib.request
pid, limit = int(sys.argv[1]), float(sys.argv[2])
end = time.time() + limit
while time.time() < end:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("tritonserver exited during start-up")
    try:
        port = os.environ.get("TRITON_HTTP_PORT", "8000")
        if urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/health/ready", timeout=2).status == 200:
            sys.exit(0)
    except Exception:
        pass
    time.sleep(1)
sys.exit(f"tritonserver not ready after {limit:.0f} s")
EOF
}

# PYSPY=/path/to/py-spy: while stream_load runs, record the Python stacks of the three models' stub
# processes and of the load client (250 samples/s, without pausing them), and for ar_decoder and the
# client also which thread holds the GIL, into results/pyspy/ (perf/pyspy_summary.py reads them).
SPIES=()
start_pyspy() {  # start_pyspy LOAD_PID (the `timeout` running stream_load)
    local dir=$RES/pyspy model pid client
    mkdir -p "$dir"
    date +%s%N >"$dir/start"
    spy() {  # spy NAME PID [--gil]
        "$PYSPY" record --nonblocking --threads -r 250 -f raw -o "$dir/$1.txt" -p "$2" ${3:-} \
            >"$dir/$1.log" 2>&1 &
        SPIES+=($!)
    }
    for model in text_encoder ar_decoder vocoder; do
        pid=$(pgrep -f "triton_python_backend_stub .*/$model/1/model.py" | head -n 1)
        [ -n "$pid" ] || { echo "pyspy: no stub process for $model"; continue; }
        spy "$model" "$pid"
        [ "$model" = ar_decoder ] && spy ar_decoder_gil "$pid" --gil
    done
    for _ in $(seq 20); do client=$(pgrep -P "$1" | head -n 1); [ -n "$client" ] && break; sleep 0.1; done
    if [ -n "$client" ]; then
        spy client "$client"
        spy client_gil "$client" --gil
    fi
}

stop_pyspy() {
    [ ${#SPIES[@]} -gt 0 ] || return 0
    kill -INT "${SPIES[@]}" 2>/dev/null
    wait "${SPIES[@]}" 2>/dev/null
    awk -v now="$(date +%s%N)" '{ printf "%.2f\n", (now - $1) / 1e9 }' "$RES/pyspy/start" >"$RES/pyspy/seconds"
    SPIES=()
}

triton_session() {
    # Default (KIND_GPU) configs: build/tritonserver.sh picks them when nvidia-smi lists a GPU.
    VOXCPM_CHECKPOINT="$CKPT" setsid "$ROOT/build/tritonserver.sh" >"$LOGS/tritonserver.log" 2>&1 &
    local server=$! t0=$SECONDS
    if wait_ready "$server" 150; then
        echo "tritonserver ready after $((SECONDS - t0)) s; GPU: $(gpu_snapshot)"
        export TRITON_GRPC_URL=127.0.0.1:${TRITON_GRPC_PORT:-8001}
        timeout -k 5 200 "$VENV/bin/python" -m perf.stream_load --url "$TRITON_GRPC_URL" --out "$RES/ours_triton.json" \
            --levels "$LEVELS" --patches "$PATCHES" --min-requests "$MIN_REQUESTS" --budget-s 140 \
            --metrics-url "http://127.0.0.1:${TRITON_METRICS_PORT:-8002}/metrics" \
            --stats-url "http://127.0.0.1:${TRITON_HTTP_PORT:-8000}/v2/models/stats" &
        local load=$!
        [ -n "${PYSPY:-}" ] && start_pyspy "$load"
        wait "$load" || echo "stream_load failed: $?"
        [ -n "${PYSPY:-}" ] && stop_pyspy
        for c in $PA_LEVELS; do
            timeout -k 5 45 bash "$ROOT/perf/perf_analyzer.sh" "$c" "$RES/perf_analyzer_c$c.json" \
                >"$LOGS/perf_analyzer_c$c.log" 2>&1 || echo "perf_analyzer c=$c failed: $?"
        done
        "$VENV/bin/python" -m perf.perf_analyzer_export "$RES"/perf_analyzer_c*.json --out "$RES/perf_analyzer.md" \
            || echo "perf_analyzer export summary failed"
        # The exports hold every response's audio as JSON text: too big to bring back.
        rm -f "$RES"/perf_analyzer_c*.json
    fi
    kill -TERM -- "-$server" 2>/dev/null
    for _ in $(seq 20); do kill -0 "$server" 2>/dev/null || break; sleep 1; done  # unloading takes a while
    kill -KILL -- "-$server" 2>/dev/null
    tail -n 20 "$LOGS/tritonserver.log"
}

part_triton() {
    run_part ours_triton 420 bash "$SELF" _fn triton_session
}

part_reference() {
    run_part reference 240 "$VENV/bin/python" -m perf.baselines.reference_bench --checkpoint "$CKPT" \
        --device "$DEVICE" $([ "$DEVICE" = cuda ] && echo --compile) \
        --out "$RES/reference.json" --levels "$REFERENCE_LEVELS" --patches "$PATCHES" --min-requests "$MIN_REQUESTS" --budget-s 200
}

part_nano() {
    run_part nanovllm 300 "$VENV/bin/python" -m perf.baselines.nanovllm_bench --checkpoint "$CKPT" \
        --out "$RES/nanovllm.json" --levels "$LEVELS" --patches "$PATCHES" --min-requests "$MIN_REQUESTS" --budget-s 200
}

part_report() {
    local files=()
    for name in ours_inprocess ours_triton nanovllm reference; do
        [ -f "$RES/$name.json" ] && files+=("$RES/$name.json")
    done
    if [ ${#files[@]} -gt 0 ]; then
        timeout 60 "$VENV/bin/python" -m perf.report "$RES/report" "${files[@]}" >"$LOGS/report.log" 2>&1 \
            || log "report failed (see logs/report.log)"
        cp "$RES/report/summary.md" "$RES/report/plots.png" "$OUT/" 2>/dev/null
        [ -f "$RES/perf_analyzer.md" ] && cat "$RES/perf_analyzer.md" >>"$OUT/summary.md"
    fi
    tar -C "$WORK" -czf "$OUT/results.tar.gz" results
    log "results: $(ls "$OUT" | tr '\n' ' ')"
}

# Internal: `gpu_campaign.sh _fn NAME` runs one function of this file (how run_part time-boxes them).
if [ "${1:-}" = _fn ]; then
    "$2"
    exit $?
fi

PARTS=("$@")
[ ${#PARTS[@]} -eq 0 ] && PARTS=(setup ours triton nano reference report)
log "commit $VOXCPM_GIT_COMMIT, parts: ${PARTS[*]}, budget ${CAMPAIGN_BUDGET_S:-560}s"
if ! setup; then
    log "setup failed: see logs; nothing else can run"
    part_report
    exit 1
fi
for part in "${PARTS[@]}"; do
    case "$part" in
        setup) ;;
        ours) part_ours ;;
        triton) part_triton ;;
        reference) part_reference ;;
        nano) part_nano ;;
        report) ;;
        *) log "unknown part $part (setup ours triton reference nano report)" ;;
    esac
done
part_report
log "done; GPU: $(gpu_snapshot)"
