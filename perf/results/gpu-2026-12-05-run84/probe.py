"""Run 84, part 1: do cuBLASLt's kernels wait for the kernel before them when captured as its
programmatic dependents, and what does such an edge save? Prints one line per check; writes
probe.json to the directory given as argv[1]."""

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

import early_start
from voxcpm_triton import ops
from voxcpm_triton.ops import lt_gemm

out_dir = Path(sys.argv[1])
torch.manual_seed(0)
dev = torch.device("cuda")
result: dict = {"device": torch.cuda.get_device_name(), "cublasLt": lt_gemm.version(), "checks": [], "chains": []}


def check(name: str, run, x: torch.Tensor) -> None:
    try:
        verdict = early_start.honours(run, x)
    except Exception as error:  # a capture the driver refuses is an answer too
        verdict = f"error: {error}"
    result["checks"].append({"name": name, "honours": verdict})
    print(f"{name}: {verdict}", flush=True)


x = torch.randn(1408, 1024, device=dev, dtype=torch.bfloat16)
check("control torch mul (no wait: expect False)", lambda xx: xx * 2, x)
check("control voxcpm row_scale (waits: expect True)", lambda xx: ops.row_scale(xx, 1e-6), x)
shapes = [(1408, 1280, 1024), (1408, 1024, 1024), (1408, 1024, 4096), (1408, 8192, 1024), (64, 6144, 2048),
          (64, 2048, 2048), (64, 2048, 6144), (64, 12288, 2048), (5632, 1024, 4096), (352, 1280, 1024)]
plans = {}
for m, n, k in shapes:
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
    w = torch.randn(n, k, device=dev, dtype=torch.bfloat16) / k ** 0.5
    check(f"F.linear {m}x{n}x{k}", lambda xx, w=w: F.linear(xx, w), a)
    with lt_gemm.tuning():
        lt_gemm.linear(a, w)
    plan = lt_gemm._plans.get(lt_gemm._key(a, w, None))
    if plan is not None and plan.algo is not None:
        out = a.new_empty((m, n))
        check(f"cuBLASLt chosen {m}x{n}x{k}",
              lambda xx, plan=plan, w=w, out=out: (lt_gemm._run(plan, plan.algo, xx, w, None, out), out)[1], a)
        plans[(m, n, k)] = (plan, a, w)

# What an edge saves: 40 x (row_scale -> GEMM) in one graph, the GEMM's edge default or programmatic.
for (m, n, k), (plan, a, w) in plans.items():
    times = {}
    for mode in ("default", "programmatic", "default", "programmatic"):
        out = a.new_empty((m, n))
        graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
            for _ in range(40):
                ops.row_scale(a, 1e-6)
                if mode == "programmatic":
                    early_start.allow(side.cuda_stream)
                lt_gemm._run(plan, plan.algo, a, w, None, out)
        for _ in range(3):
            graph.replay()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            graph.replay()
        end.record()
        end.synchronize()
        times.setdefault(mode, []).append(start.elapsed_time(end) / 20 / 40 * 1000)
    row = {"shape": [m, n, k], **{mode: min(v) for mode, v in times.items()}}
    row["saved_us"] = row["default"] - row["programmatic"]
    result["chains"].append(row)
    print(f"chain {m}x{n}x{k}: row_scale+GEMM {row['default']:.2f} us default, {row['programmatic']:.2f} us "
          f"programmatic ({row['saved_us']:+.2f})", flush=True)
(out_dir / "probe.json").write_text(json.dumps(result, indent=1))
