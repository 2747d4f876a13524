#!/usr/bin/env bash
# Usage: bash build/test.sh [pytest arguments...]
#
# Sets everything up (build/setup.sh, idempotent) and runs the pytest suite with the setup's venv:
#   tests/cpu     pure CPU
#   tests/server  marker `server`: real tritonserver on free loopback ports, CPU model configs
#   tests/gpu     marker `gpu`: skipped without a CUDA GPU
# Without arguments it runs all of tests/. A run that collects no test fails (pytest's exit code 5),
# so a broken collection can never pass as green.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/build/setup.sh"

cd "$ROOT"
# The server tier's tritonservers listen on loopback: never through an HTTP proxy that a machine
# reaching its package index through one may set for every address.
export no_proxy="127.0.0.1,localhost${no_proxy:+,$no_proxy}" NO_PROXY="127.0.0.1,localhost${NO_PROXY:+,$NO_PROXY}"
status=0
"$ROOT/build/out/venv/bin/python" -m pytest -rs --durations=10 "$@" || status=$?
if [ "$status" -eq 5 ]; then
    echo "test.sh: pytest collected no tests; treating that as a failure" >&2
    exit 1
fi
exit "$status"
