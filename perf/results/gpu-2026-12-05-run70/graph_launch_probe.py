"""Does a CUDA graph's replay() block the host once the graph has enough nodes? (prepared for run 70's
call 2, not run yet)

Run 70 found the opt-in FP8 step's `graph.replay()` returning only when the step was done (launch
13.82 ms), while the bf16 step's returns in 0.01 ms; the FP8 graph has ~300 more kernel nodes (the
activation quantisations) than bf16's ~1300. If replay blocks past some node count, that explains
it, and it also bounds any change that adds nodes to the bf16 step (row_scale_beside.patch adds two
event nodes per folded layer), since launch-ahead needs a replay that returns at once.

Each graph holds N kernels of ~1 us (torch.cuda._sleep), in one chain, or with every fourth kernel
forked to a second stream and joined back (the shape of side_stream.Beside), or with every fourth
kernel an FP8 rowwise-scaled GEMM (torch._scaled_mm, as fp8_linear calls it, at 64 x 1024 x 1024):
if only graphs with those block, the node count is not the cause. Replays run back to back
(no sync between them), so the GPU falls behind and the queue fills as in the engine's launch-ahead.
Per N: the host time of one replay() call (median, and the largest), the wall time per replay, and
the GPU time per replay from events.

    python perf/results/gpu-2026-12-05-run70/graph_launch_probe.py OUT.md
"""
import statistics
import sys
import time

import torch

SIZES = (500, 1000, 1200, 1400, 1600, 2000, 3000, 5000)
SLEEP_CYCLES = 1500  # ~1 us a kernel on a ~1.8 GHz Hopper clock
REPLAYS = 12


def fp8_operands() -> tuple:
    a = torch.randn(64, 1024, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(1024, 1024, device="cuda").to(torch.float8_e4m3fn)
    operands = (a, b.t(), torch.ones(64, 1, device="cuda"), torch.ones(1, 1024, device="cuda"))
    scaled_mm(operands)  # its library's set-up happens outside any capture
    torch.cuda.synchronize()
    return operands


def scaled_mm(operands: tuple) -> torch.Tensor:
    a, b, scale_a, scale_b = operands
    return torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16, use_fast_accum=True)


def capture(nodes: int, variant: str, fp8: tuple) -> torch.cuda.CUDAGraph:
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    with torch.cuda.graph(graph):
        main = torch.cuda.current_stream()
        for i in range(nodes):
            if variant == "fork" and i % 4 == 0:
                side.wait_stream(main)
                with torch.cuda.stream(side):
                    torch.cuda._sleep(SLEEP_CYCLES)
                main.wait_stream(side)
            elif variant == "fp8" and i % 4 == 0:
                scaled_mm(fp8)
            else:
                torch.cuda._sleep(SLEEP_CYCLES)
    return graph


def measure(graph: torch.cuda.CUDAGraph) -> dict:
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    torch.cuda.synchronize()
    gpu_ms = start.elapsed_time(end)
    launches = []
    began = time.perf_counter()
    for _ in range(REPLAYS):
        t = time.perf_counter()
        graph.replay()
        launches.append((time.perf_counter() - t) * 1e3)
    torch.cuda.synchronize()
    wall_ms = (time.perf_counter() - began) * 1e3 / REPLAYS
    return {"gpu_ms": gpu_ms, "launch_p50": statistics.median(launches), "launch_max": max(launches),
            "wall_ms": wall_ms}


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else "graph_launch_probe.md"
    lines = [f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}", "",
             "| kernels | every fourth | GPU ms a replay | replay() ms p50 | replay() ms max | wall ms a replay |",
             "|---|---|---|---|---|---|"]
    fp8 = fp8_operands()
    for variant in ("chain", "fork", "fp8"):
        for nodes in SIZES:
            graph = capture(nodes, variant, fp8)
            r = measure(graph)
            lines.append(f"| {nodes} | {variant} | {r['gpu_ms']:.2f} | {r['launch_p50']:.3f} | "
                         f"{r['launch_max']:.3f} | {r['wall_ms']:.2f} |")
            print(lines[-1], flush=True)
            del graph
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
