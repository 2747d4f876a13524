#!/usr/bin/env bash
# GPU checks of the CUDA ops in one command (one device call): build libvoxcpm_kernels.so for the
# local GPU, run the GPU parity and CUDA-graph tests, benchmark every op against its PyTorch
# baselines. Everything lands in $OUT (default build/out/kernel_checks):
#   nvidia-smi.txt, build.log (ptxas resource report), pytest.log, pytest.xml, bench_ops.log,
#   bench_ops.json [, sanitizer.log]
# Environment: PYTHON (default python3), VOXCPM_CUDA_ARCHS (default 90), BENCH_ARGS (e.g. --quick
# or --no-compile), SANITIZE=1 to add a compute-sanitizer memcheck pass over a small bf16 subset.
# Exit status: 0 when the build, the tests and the benchmark all succeeded.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT_DIR="${OUT:-$ROOT/build/out/kernel_checks}"
PY="${PYTHON:-python3}"
mkdir -p "$OUT_DIR"
cd "$ROOT" || exit 1
export PYTHONUNBUFFERED=1
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export VOXCPM_KERNELS_LIB="$ROOT/build/out/lib/libvoxcpm_kernels.so"
status=0

nvidia-smi > "$OUT_DIR/nvidia-smi.txt" 2>&1 || true

echo "== build"
if ! VOXCPM_CUDA_ARCHS="${VOXCPM_CUDA_ARCHS:-90}" VOXCPM_PTXAS_VERBOSE=1 \
        bash build/build_kernels.sh > "$OUT_DIR/build.log" 2>&1; then
    tail -40 "$OUT_DIR/build.log"
    echo "run_kernel_checks: build failed (see build.log)"
    exit 1
fi
grep -E "error|warning|[1-9][0-9]* bytes spill" "$OUT_DIR/build.log" || echo "build: no errors, warnings or spills"
[ -f "$VOXCPM_KERNELS_LIB" ] || { echo "run_kernel_checks: no library built (nvcc missing?)"; exit 1; }

echo "== tests"
if ! "$PY" -m pytest --version > /dev/null 2>&1; then
    echo "run_kernel_checks: pytest is not installed for $PY (carry pytest, pluggy, iniconfig, packaging wheels)"
    status=1
else
    "$PY" -m pytest -q -m gpu -p no:cacheprovider --junitxml="$OUT_DIR/pytest.xml" \
        tests/gpu/test_ops_parity.py tests/gpu/test_ops_cuda_graph.py > "$OUT_DIR/pytest.log" 2>&1 || status=1
    grep -E "^(FAILED|ERROR)" "$OUT_DIR/pytest.log" | head -30
    tail -1 "$OUT_DIR/pytest.log"
fi

if [ "${SANITIZE:-0}" = 1 ]; then
    echo "== compute-sanitizer memcheck (bf16 subset)"
    timeout 240 compute-sanitizer --tool memcheck --error-exitcode 9 "$PY" -m pytest -q -p no:cacheprovider \
        tests/gpu/test_ops_parity.py -k "bfloat16 and not 2304 and not 256 and not opcheck" \
        > "$OUT_DIR/sanitizer.log" 2>&1 || status=1
    grep -E "ERROR SUMMARY|passed|failed" "$OUT_DIR/sanitizer.log" | tail -3
fi

echo "== benchmark"
# shellcheck disable=SC2086
"$PY" perf/bench_ops.py --out "$OUT_DIR/bench_ops.json" ${BENCH_ARGS:-} > "$OUT_DIR/bench_ops.log" 2>&1 || status=1
cat "$OUT_DIR/bench_ops.log"
echo "run_kernel_checks: exit $status; files in $OUT_DIR"
exit $status
