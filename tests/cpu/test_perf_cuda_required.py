"""perf's GPU tools on a machine without a GPU: one line naming the tool and exit status 2, never a
traceback from inside torch or an error blaming the tool's input."""

import importlib
import sys

import pytest
import torch

pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="the tools would run on this GPU")

# tool -> its arguments (the required ones, made up: the check comes before any is used) and what
# it offers instead of a GPU
TOOLS = {
    "admission_latency": (["--out", "unused"], None),
    "bench_ops": (["--out", "unused"], None),
    "fp8_drift": (["--out", "unused"], None),
    "gate_up_sweep": ([], None),
    "glue_ops": (["--out", "unused"], "--cpu-dry-run"),
    "inprocess_bench": (["--checkpoint", "missing", "--out", "unused.json"], "--device cpu"),
    "lt_config_search": ([], None),
    "lt_gemm_sweep": ([], None),
    "profile_step": (["--out", "unused"], "--cpu-dry-run"),
    "profile_vocoder": (["--out", "unused"], None),
    "short_attention_probe": ([], None),
    "step_breakdown": (["--checkpoint", "missing", "--out", "unused"], "--device cpu"),
    "sweep_decode_attention": (["--out", "unused"], None),
}


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_gpu_tool_says_it_needs_a_gpu(tool, monkeypatch, capsys, tmp_path):
    arguments, alternative = TOOLS[tool]
    monkeypatch.chdir(tmp_path)  # nothing may be written, but if it were, not into the checkout
    monkeypatch.setattr(sys, "argv", [tool, *arguments])
    main = importlib.import_module(f"perf.{tool}").main
    try:
        status = main()
    except SystemExit as exit_:
        status = exit_.code
    assert status == 2
    instead = f" (or {alternative})" if alternative else ""
    assert capsys.readouterr().err.strip().splitlines() == [f"{tool}: needs a CUDA GPU{instead}"]
    assert not list(tmp_path.iterdir())
