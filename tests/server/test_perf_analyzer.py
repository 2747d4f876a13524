"""A short perf_analyzer run (gRPC streaming, the decoupled ensemble) completes and exits 0."""

import json
import subprocess

import pytest

from tritonserver_process import perf_analyzer_command

pytestmark = pytest.mark.server


def test_perf_analyzer_against_the_ensemble(triton_server, tmp_path):
    data = tmp_path / "inputs.json"
    data.write_text(json.dumps({"data": [{"TEXT": ["Measure this."], "MAX_SECONDS": [0.3], "SEED": [3]}]}))
    command, env = perf_analyzer_command(tmp_path)
    command += [
        "-m", "voxcpm", "-u", triton_server.grpc_url, "-i", "grpc", "--streaming",
        "--input-data", str(data), "--concurrency-range", "2",
        "--measurement-mode", "count_windows", "--measurement-request-count", "4", "--max-trials", "3",
        "--stability-percentage", "999",
    ]
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"perf_analyzer failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    assert "Throughput" in run.stdout
    assert triton_server.wait_idle() == 0
