"""Experiment: the LocDiT / LM GEMMs on CUTLASS stream-K / pingpong schedules against cuBLASLt's best."""
import ctypes, os, sys, torch
from voxcpm_triton.ops import lt_gemm
lib = ctypes.CDLL(os.environ["VOXCPM_KERNELS_LIB"])
lib.voxcpm_linear_sm90_workspace.restype = ctypes.c_int64
lib.voxcpm_linear_sm90_workspace.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_int]
lib.voxcpm_linear_sm90.restype = ctypes.c_int
lib.voxcpm_linear_sm90.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3 + [ctypes.c_int, ctypes.c_void_p,
                                                                               ctypes.c_int64, ctypes.c_void_p]
NAMES = ["coop128x128_sk", "coop128x128_c2_sk", "coop128x256_sk", "coop256x128_sk", "pp64x128", "pp64x256"]
MODES = [("heur", None), ("sk", "1"), ("dp", "3")]
shapes = [(rows, k, n, name) for rows in (1408, 5632) for (name, k, n) in
          (("qkv", 1024, 2560), ("o_proj", 2048, 1024), ("down", 4096, 1024))]
shapes += [(rows, k, n, name) for rows in (64, 256) for (name, k, n) in
           (("lm_qkv", 2048, 2560), ("lm_o", 2048, 2048), ("lm_gate_up", 2048, 12288), ("lm_down", 6144, 2048))]
torch.manual_seed(0)
ws = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
stream = lambda: torch.cuda.current_stream().cuda_stream
for rows, k, n, name in shapes:
    x = torch.randn(rows, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
    with lt_gemm.tuning():
        lt_gemm.linear(x, w)
    ref = lt_gemm.linear(x, w)
    t_lt = lt_gemm.time_call(lambda: lt_gemm.linear(x, w)) * 1e3
    flop = 2 * rows * k * n
    cells = []
    out = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
    for s, sname in enumerate(NAMES):
        for mname, mval in (MODES if "sk" in sname else [("", None)]):
            if mval is None: os.environ.pop("VOXCPM_SK_MODE", None)
            else: os.environ["VOXCPM_SK_MODE"] = mval
            need = lib.voxcpm_linear_sm90_workspace(rows, k, n, s)
            call = lambda: lib.voxcpm_linear_sm90(x.data_ptr(), w.data_ptr(), out.data_ptr(), rows, k, n, s,
                                                  ws.data_ptr(), ws.numel(), stream())
            err = call()
            if err != 0:
                cells.append(f"{sname}/{mname} err{err}"); continue
            d = (out.float() - ref.float()).abs().max().item()
            t = lt_gemm.time_call(call) * 1e3
            cells.append(f"{sname}/{mname} {t:.1f} ({flop/t/1e6:.0f}, ws {need>>10}K, d {d:.2g})")
    os.environ.pop("VOXCPM_SK_MODE", None)
    print(f"{name} {rows}x{k}->{n}: cuBLASLt {t_lt:.1f} us ({flop/t_lt/1e6:.0f} TF/s) | " + " | ".join(cells), flush=True)
