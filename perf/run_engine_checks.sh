#!/usr/bin/env bash
# GPU checks of the CUDA-graph engine in one command (one device call, < 9 minutes):
#   OUT=/some/dir bash perf/run_engine_checks.sh
# 1. builds libvoxcpm_kernels.so for the local GPU (build/build_kernels.sh, VOXCPM_CUDA_ARCHS=90),
# 2. runs tests/gpu with pytest (marker gpu),
# 3. runs perf/profile_step.py (full-size VoxCPM2-shaped random bf16 model: ms/step, RTF, audio s/s
#    per mode and batch size, profiler op tables, first patch after admission).
# Each stage is time-boxed. Files in $OUT (default build/out/engine_checks), six of them:
#   build.log (nvidia-smi + build), pytest.log, profile_step.log, profile_step.json,
#   profile_step.md (the table for perf/RESULTS.md), profile_ops.txt (profiler tables)
# Environment: PYTHON (default /opt/torch/.venv/bin/python3 when present, else python3),
#   BUILD_S / TESTS_S / PROFILE_S stage limits in seconds (100 / 170 / 260), PROFILE_ARGS (extra
#   profile_step.py arguments, e.g. "--modes eager,graph,graph_ops --batches 1,64"), PYTEST_ARGS.
# Exit status: 0 when every stage succeeded.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="${OUT:-$ROOT/build/out/engine_checks}"
if [ -z "${PYTHON:-}" ]; then
    if [ -x /opt/torch/.venv/bin/python3 ]; then PYTHON=/opt/torch/.venv/bin/python3; else PYTHON=python3; fi
fi
mkdir -p "$OUT_DIR"
cd "$ROOT" || exit 1
export PYTHONUNBUFFERED=1
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export VOXCPM_KERNELS_LIB="$ROOT/build/out/lib/libvoxcpm_kernels.so"
status=0
started=$(date +%s)
stage() { echo "== $1 ($(( $(date +%s) - started )) s in)"; }

stage build
{ nvidia-smi; echo; } > "$OUT_DIR/build.log" 2>&1
if ! VOXCPM_CUDA_ARCHS="${VOXCPM_CUDA_ARCHS:-90}" timeout "${BUILD_S:-100}" \
        bash build/build_kernels.sh >> "$OUT_DIR/build.log" 2>&1; then
    tail -30 "$OUT_DIR/build.log"
    echo "run_engine_checks: kernel build failed; continuing without the library (attention falls back)"
    status=1
fi
tail -2 "$OUT_DIR/build.log"

stage "tests/gpu"
# The engine tests first (their own time box), then the ops tests with what is left of TESTS_S.
tests_limit="${TESTS_S:-170}"
tests_started=$(date +%s)
# shellcheck disable=SC2086
timeout $((tests_limit * 2 / 3)) "$PYTHON" -m pytest -v -m gpu -p no:cacheprovider -rs -s --durations=8 ${PYTEST_ARGS:-} \
    tests/gpu/test_graph_runner.py tests/gpu/test_engine_gpu.py > "$OUT_DIR/pytest.log" 2>&1 || status=1
left=$((tests_limit - ($(date +%s) - tests_started)))
if [ "$left" -gt 10 ]; then
    echo "---- ops tests (tests/gpu/test_ops_*.py)" >> "$OUT_DIR/pytest.log"
    # shellcheck disable=SC2086
    timeout "$left" "$PYTHON" -m pytest -q -m gpu -p no:cacheprovider -rs ${PYTEST_ARGS:-} \
        tests/gpu/test_ops_parity.py tests/gpu/test_ops_cuda_graph.py >> "$OUT_DIR/pytest.log" 2>&1 || status=1
fi
grep -E "PASSED|FAILED|ERROR|SKIPPED|max \|diff\||passed|failed" "$OUT_DIR/pytest.log" | head -60

stage profile_step
limit="${PROFILE_S:-260}"
# shellcheck disable=SC2086
timeout "$limit" "$PYTHON" perf/profile_step.py --out "$OUT_DIR" --budget-s $((limit - 60)) ${PROFILE_ARGS:-} \
    > "$OUT_DIR/profile_step.log" 2>&1 || status=1
tail -30 "$OUT_DIR/profile_step.log"

stage "done, exit $status"
exit $status
