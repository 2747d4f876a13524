"""Run 106's probe: do lt_gemm's choices for the LMs' 64-row GEMMs, timed with a warm weight, stay the
fastest with the weight cold, as the step runs them?

lt_gemm.time_call repeats one GEMM on one weight, so a weight of up to ~50 MB answers from L2 after
the first call; in the step each LM layer's weight is read once, from HBM. For each LM shape this
times, with cold weights (one GEMM per weight copy over >= 400 MB of copies, captured in a CUDA graph
and replayed back to back, as lm_gemm_probe.py of run 105): F.linear, lt_gemm's tuned choice, and
every algorithm cuBLASLt's heuristic offers, each also warm (lt_gemm.time_call). o_proj and down add
into the residual in the step (lt_gemm.linear_add_, beta = 1): those are timed with beta = 1 too.

    python lt_cold_probe.py OUT_DIR [rows]
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from perf.bench_ops import cold_time_us  # noqa: E402
from voxcpm_triton.ops import lt_gemm  # noqa: E402

# (n, k, beta): qkv and gate_up are plain, o_proj and down accumulate into the residual.
SHAPES = {"qkv": (2560, 2048, 0.0), "o_proj": (2048, 2048, 1.0), "gate_up": (12288, 2048, 0.0),
          "down": (2048, 6144, 1.0)}
REPLAYS = 20


def main() -> None:
    out_dir = Path(sys.argv[1])
    rows = int(sys.argv[2]) if len(sys.argv) > 2 else 64
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    dev = torch.device("cuda")
    results = []
    for name, (n, k, beta) in SHAPES.items():
        copies = max(4, math.ceil(400e6 / (n * k * 2)))
        weights = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(copies)]
        x = torch.randn(rows, k, device=dev, dtype=torch.bfloat16)
        out = torch.zeros(rows, n, device=dev, dtype=torch.bfloat16)
        with lt_gemm.tuning():
            if beta:
                lt_gemm.linear_add_(x, weights[0], out.clone(), 1.0)
            else:
                lt_gemm.linear(x, weights[0])
        key = lt_gemm._add_key(x, weights[0]) if beta else lt_gemm._key(x, weights[0], None)
        chosen = lt_gemm._plans.get(key)
        plan, algos = lt_gemm.candidates(x, weights[0], None)
        expected = F.linear(x, weights[0])

        def baseline(w: torch.Tensor) -> None:
            if beta:
                out.add_(F.linear(x, w))
            else:
                torch.matmul(x, w.t(), out=out)

        # (label, plan, algo); plan None: F.linear (+ add_)
        variants = [("F.linear" + (" + add_" if beta else ""), None, None)]
        if chosen is not None and chosen.algo is not None:
            variants.append(("lt_gemm's choice", chosen, chosen.algo))
        variants += [(f"heuristic #{i}", plan, algo) for i, algo in enumerate(algos)]
        for label, lt_plan, algo in variants:
            if lt_plan is None:
                call = baseline
            else:
                def call(w: torch.Tensor, p=lt_plan, a=algo) -> None:
                    lt_gemm._run(p, a, x, w, None, out, 1.0, beta)
            choice = chosen.algo if chosen is not None else None
            row = dict(shape=name, variant=label, rows=rows, n=n, k=k, beta=beta, copies=copies,
                       is_choice=algo is not None and choice is not None and bytes(algo) == bytes(choice))
            try:
                product = expected
                if lt_plan is not None:
                    product = torch.zeros_like(out)
                    lt_gemm._run(lt_plan, algo, x, weights[0], None, product, 1.0, 0.0)
                row["same_bits"] = bool(torch.equal(product, expected))
                row["warm_us"] = round(lt_gemm.time_call(lambda: call(weights[0])) * 1000, 2)
                row["cold_us"] = round(cold_time_us(call, weights, REPLAYS), 2)
            except Exception as exc:  # an algorithm that fails is a result too
                row["error"] = str(exc)[:200]
            results.append(row)
            print(json.dumps(row), flush=True)
        weights.clear()
        torch.cuda.empty_cache()

    (out_dir / "lt_cold_probe.json").write_text(json.dumps(results, indent=1))
    lines = [f"rows {rows}, {torch.cuda.get_device_name()}", "",
             "| shape | variant | warm us | cold us | same bits as F.linear | lt_gemm's choice |", "|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['shape']} | {r['variant']} | {r.get('warm_us', r.get('error', ''))} | {r.get('cold_us', '')} | "
                     f"{r.get('same_bits', '')} | {'yes' if r['is_choice'] else ''} |")
    (out_dir / "lt_cold_probe.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
