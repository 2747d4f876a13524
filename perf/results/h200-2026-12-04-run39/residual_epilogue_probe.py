"""Experiment: o_proj / down + add_rmsnorm against the same GEMM with the residual add in cuBLASLt's
epilogue (beta = 1, C = D = residual) + rmsnorm, at LocDiT shapes."""
import ctypes, torch
from voxcpm_triton.ops import lt_gemm
from voxcpm_triton.ops.rmsnorm import add_rmsnorm, rmsnorm
from voxcpm_triton import ops  # noqa: F401  (registers the custom ops)

def lt_residual(plan, algo, x, w, res, scale):
    dev = lt_gemm._device(x.device)
    alpha, beta = ctypes.c_float(scale), ctypes.c_float(1.0)
    lt_gemm._call("cublasLtMatmul", dev.handle, plan.desc, ctypes.byref(alpha), w.data_ptr(), plan.w_layout,
                  x.data_ptr(), plan.x_layout, ctypes.byref(beta), res.data_ptr(), plan.y_layout, res.data_ptr(),
                  plan.y_layout, ctypes.byref(algo), dev.workspace.data_ptr(), lt_gemm.WORKSPACE_BYTES,
                  torch.cuda.current_stream().cuda_stream)
    return res

torch.manual_seed(0)
scale, eps = 0.2, 1e-6
for rows in (1408, 5632):
    for name, k in (("o_proj", 2048), ("down", 4096)):
        n = 1024
        x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
        nw = torch.rand(n, device="cuda", dtype=torch.bfloat16) + 0.5
        res0 = torch.randn(rows, n, device="cuda", dtype=torch.bfloat16)
        with lt_gemm.tuning():
            lt_gemm.linear(x, w)
        res = res0.clone()
        a = lambda: add_rmsnorm(res, lt_gemm.linear(x, w), nw, eps, scale)
        t_gemm = lt_gemm.time_call(lambda: lt_gemm.linear(x, w)) * 1e3
        t_a = lt_gemm.time_call(a) * 1e3
        y = lt_gemm.linear(x, w)
        t_norm_add = lt_gemm.time_call(lambda: add_rmsnorm(res, y, nw, eps, scale)) * 1e3
        t_norm = lt_gemm.time_call(lambda: rmsnorm(res, nw, eps)) * 1e3
        plan, algos = lt_gemm.candidates(x, w, None)
        best = None
        ref_res = res0.clone(); ref_h = add_rmsnorm(ref_res, lt_gemm.linear(x, w), nw, eps, scale)
        for i, algo in enumerate(algos):
            try:
                r = lt_residual(plan, algo, x, w, res0.clone(), scale)
            except lt_gemm.LtError:
                continue
            d = (r.float() - ref_res.float()).abs().max().item()
            rr = res0.clone()
            t = lt_gemm.time_call(lambda: lt_residual(plan, algo, x, w, rr, scale)) * 1e3
            if best is None or t < best[0]:
                best = (t, i, d)
        t_b = lt_gemm.time_call(lambda: (lt_residual(plan, algos[best[1]], x, w, res, scale), rmsnorm(res, nw, eps))) * 1e3
        print(f"{name} rows {rows}: GEMM {t_gemm:.1f} + add_rmsnorm {t_norm_add:.1f} = chain {t_a:.1f} us | "
              f"GEMM+C best {best[0]:.1f} (algo {best[1]}, diff {best[2]:.3g}) + rmsnorm {t_norm:.1f} = chain {t_b:.1f} us "
              f"| gain {t_a - t_b:.1f} us", flush=True)
