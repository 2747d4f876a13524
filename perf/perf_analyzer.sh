#!/usr/bin/env bash
# perf_analyzer against the decoupled `voxcpm` ensemble at one concurrency, gRPC streaming.
#
#   perf/perf_analyzer.sh CONCURRENCY EXPORT_JSON [extra perf_analyzer options...]
#
# Inputs: perf/perf_analyzer/voxcpm_10_patches.json (the harness's fixed texts, MAX_SECONDS 1.6 = 10
# VoxCPM2 patches, fixed seeds; use a checkpoint made with perf/force_length.py so every request runs
# to the cap). Shorter than the harness's 8 s because perf_analyzer 2.51 writes every response's
# AUDIO into the export as JSON text (~1.5 MB per 1.6-s request); the harness's sweep is the main
# measurement, this is the cross-check with NVIDIA's tool. For decoupled models perf_analyzer's own latency is time to the LAST response; the profile
# export (--profile-export-file) keeps every response's timestamp, and perf/perf_analyzer_export.py
# turns it into first-response latency percentiles.
# Environment: TRITON_GRPC_URL (127.0.0.1:8001), PA_REQUESTS (requests per measurement window,
# default max(concurrency, 4)), PA_INPUT (input data file).
# perf_analyzer itself comes through build/perf_analyzer.sh (build/setup.sh installs it; on the GPU
# machine perf/gpu_campaign.sh lays out the same files from the device bundle).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CONCURRENCY=${1:?usage: perf/perf_analyzer.sh CONCURRENCY EXPORT_JSON [options...]}
EXPORT=${2:?usage: perf/perf_analyzer.sh CONCURRENCY EXPORT_JSON [options...]}
shift 2
REQUESTS=${PA_REQUESTS:-$((CONCURRENCY > 4 ? CONCURRENCY : 4))}
exec bash "$ROOT/build/perf_analyzer.sh" \
    -m voxcpm -u "${TRITON_GRPC_URL:-127.0.0.1:8001}" -i grpc --streaming \
    --input-data "${PA_INPUT:-$ROOT/perf/perf_analyzer/voxcpm_10_patches.json}" \
    --concurrency-range "$CONCURRENCY" \
    --measurement-mode count_windows --measurement-request-count "$REQUESTS" \
    --max-trials 3 --stability-percentage 999 \
    --profile-export-file "$EXPORT" "$@"
