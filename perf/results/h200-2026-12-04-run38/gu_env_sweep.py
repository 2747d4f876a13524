"""Experiment: gate_up_sm90 schedules x tile scheduler raster / swizzle (env read per call)."""
import os, sys, torch
from voxcpm_triton.ops import gate_up_sm90, lt_gemm
from voxcpm_triton.ops.swiglu import swiglu
K, INTER = 1024, 4096
combos = [("", ""), ("1", "1"), ("2", "1"), ("0", "2"), ("0", "4"), ("0", "8"), ("1", "4"), ("2", "4")]
torch.manual_seed(0)
for streams in [int(s) for s in sys.argv[1].split(",")]:
    rows = 22 * streams
    x = torch.randn(rows, K, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(2 * INTER, K, device="cuda", dtype=torch.bfloat16) / K ** 0.5
    il = gate_up_sm90.interleave(w)
    with lt_gemm.tuning():
        lt_gemm.linear(x, w)
    ref = swiglu(lt_gemm.linear(x, w))
    gemm = lt_gemm.time_call(lambda: lt_gemm.linear(x, w)) * 1e3
    unf = lt_gemm.time_call(lambda: swiglu(lt_gemm.linear(x, w))) * 1e3
    flop = 2 * rows * K * 2 * INTER
    print(f"## streams {streams} rows {rows}: cuBLAS GEMM {gemm:.1f} us ({flop/gemm/1e6:.0f} TF/s), +swiglu {unf:.1f}", flush=True)
    for raster, swz in combos:
        for name, val in (("VOXCPM_GU_RASTER", raster), ("VOXCPM_GU_SWIZZLE", swz)):
            if val: os.environ[name] = val
            else: os.environ.pop(name, None)
        cells = []
        for sname, s in gate_up_sm90.SCHEDULES.items():
            try:
                out = gate_up_sm90.fused(x, il, s)
                same = (out.float() - ref.float()).abs().max().item()
                t = lt_gemm.time_call(lambda: gate_up_sm90.fused(x, il, s)) * 1e3
                cells.append(f"{sname} {t:.1f}us/{flop/t/1e6:.0f}TF diff{same:.3g}")
            except Exception as e:
                cells.append(f"{sname} ERR {str(e)[:60]}")
        print(f"raster={raster or 'def'} swz={swz or 'def'}: " + " | ".join(cells), flush=True)
