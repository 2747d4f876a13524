"""Probe (run 63, call 8): how the LocDiT's time per step grows with the number of streams.

Full-size VoxCPM2-shaped random bf16 model, a graph_ops runner per batch size; the LocDiT half of
the step (condition + 9-step CFG sampler) as one CUDA graph, warmed up inside lt_gemm.tuning() so
that it runs the tuned cuBLASLt and CUTLASS choices as the engine does. Prints device ms per replay
and per LocDiT layer pass (108 a step).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import torch  # noqa: E402

from perf.profile_step import MODES, decoding_runner, random_model  # noqa: E402
from voxcpm_triton.ops import lt_gemm  # noqa: E402

ITERS = 20
PASSES = 108  # 12 layers x 9 Euler steps
dev = torch.device("cuda")
model = random_model("full", dev)
print("| streams | LocDiT ms a step | us a layer pass | us a pass per stream |\n|---|---|---|---|", flush=True)
for batch in (1, 8, 16, 32, 48, 64, 96, 128):
    runner, _ = decoding_runner(model, batch, 300, 1024, 10, 2.0, MODES["graph_ops"])
    slots = torch.arange(batch, device=dev)
    noise = torch.randn(batch, *runner.prev_patch.shape[1:], device=dev, dtype=runner.prev_patch.dtype)

    @torch.no_grad()
    def dit() -> None:
        mu = runner.model.dit_condition(runner.lm_hidden[slots], runner.residual_hidden[slots])
        patch = runner._sample([(10, None)], noise, mu, runner.prev_patch[slots], runner.cfg_value[slots])
        runner.prev_patch[slots] = patch

    with lt_gemm.tuning():
        for _ in range(3):
            dit()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dit()
    for _ in range(3):
        graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(ITERS):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / ITERS
    print(f"| {batch} | {ms:.3f} | {ms * 1e3 / PASSES:.1f} | {ms * 1e3 / PASSES / batch:.2f} |", flush=True)
    del graph, runner
    torch.cuda.empty_cache()
