"""Run 105's probe: the LMs' GEMMs at 64 rows (the 64-stream step), cuBLAS against the swapped-operand
CUTLASS GEMMs of lm_gemm_probe.cu, each with a cold weight as in the step.

Each variant is captured in a CUDA graph as one GEMM per weight copy, over enough copies (>= 400 MB)
that no weight is in the 50 MB L2 when its GEMM starts, and the graph is replayed back to back: the
time per GEMM is a step's kernel time for that GEMM, boundaries included (no programmatic launch on
either side). Correctness: each CUTLASS variant's output against an fp32 product of the same
operands, next to cuBLAS's own error.

    python lm_gemm_probe.py LIB.so OUT_DIR [rows]
"""

from __future__ import annotations

import ctypes
import json
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from perf.bench_ops import cold_time_us  # noqa: E402
from voxcpm_triton.ops import lt_gemm  # noqa: E402

SHAPES = {"qkv": (2560, 2048), "o_proj": (2048, 2048), "gate_up": (12288, 2048), "down": (2048, 6144)}
MODES = [(0, 1), (1, 1), (3, 1), (2, 2), (2, 3), (2, 4), (2, 6), (2, 8)]  # (mode, splits); see the .cu
MODE_NAMES = {0: "heuristic", 1: "data-parallel", 2: "split-k", 3: "stream-k"}
REPLAYS = 20


def main() -> None:
    lib = ctypes.CDLL(sys.argv[1])
    out_dir = Path(sys.argv[2])
    rows = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    out_dir.mkdir(parents=True, exist_ok=True)
    lib.probe_workspace.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 5 + [
        ctypes.POINTER(ctypes.c_size_t)]
    lib.probe_gemm.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_int] * 5 + [
        ctypes.c_void_p, ctypes.c_void_p]
    torch.manual_seed(0)
    dev = torch.device("cuda")
    results = []
    for name, (n, k) in SHAPES.items():
        weight_bytes = n * k * 2
        copies = max(4, math.ceil(400e6 / weight_bytes))
        weights = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(copies)]
        x = torch.randn(rows, k, device=dev, dtype=torch.bfloat16)
        out = torch.empty(rows, n, device=dev, dtype=torch.bfloat16)
        ref = x.float() @ weights[0].float().t()
        scale = ref.abs().max().item()

        def cutlass_call(config: int, mode: int, splits: int, ws: torch.Tensor):
            def call(w: torch.Tensor) -> None:
                err = lib.probe_gemm(config, x.data_ptr(), w.data_ptr(), out.data_ptr(), rows, n, k, mode, splits,
                                     ws.data_ptr(), torch.cuda.current_stream().cuda_stream)
                if err != 0:
                    raise RuntimeError(f"probe_gemm {config} {mode} {splits}: {err}")
            return call

        variants = {"cublas": lambda w: torch.matmul(x, w.t(), out=out)}
        with lt_gemm.tuning():
            lt_gemm.linear(x, weights[0])
        variants["lt_gemm"] = lambda w: out.copy_(lt_gemm.linear(x, w))
        for config in (0, 1):
            for mode, splits in MODES:
                size = ctypes.c_size_t(0)
                if lib.probe_workspace(config, x.data_ptr(), weights[0].data_ptr(), out.data_ptr(), rows, n, k, mode,
                                       splits, ctypes.byref(size)) != 0:
                    results.append(dict(shape=name, variant=f"c{config} {MODE_NAMES[mode]} {splits}", error="cannot implement"))
                    continue
                ws = torch.zeros(max(int(size.value), 16), device=dev, dtype=torch.uint8)
                variants[f"c{config} {MODE_NAMES[mode]} {splits}"] = cutlass_call(config, mode, splits, ws)

        for label, call in variants.items():
            row = dict(shape=name, variant=label, rows=rows, n=n, k=k, copies=copies)
            try:
                call(weights[0])
                torch.cuda.synchronize()
                row["max_err"] = (out.float() - ref).abs().max().item() / scale
                us = cold_time_us(call, weights, REPLAYS)
                row.update(us=round(us, 2), tb_s=round(weight_bytes / us / 1e6, 2))
            except Exception as exc:  # a variant that fails to run is a result too
                row["error"] = str(exc)[:200]
            results.append(row)
            print(json.dumps(row), flush=True)
        del weights
        torch.cuda.empty_cache()

    (out_dir / "lm_gemm_probe.json").write_text(json.dumps(results, indent=1))
    lines = [f"rows {rows}, {torch.cuda.get_device_name()}", "", "| shape | variant | us | TB/s | max rel err |",
             "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['shape']} | {r['variant']} | {r.get('us', r.get('error', ''))} | {r.get('tb_s', '')} | "
                     f"{r.get('max_err', 0):.2e} |")
    (out_dir / "lm_gemm_probe.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
