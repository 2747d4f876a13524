# Runs the stack from the watchdog build; prints where a wait gave up, if one did.
import math, sys, time, torch
sys.path.insert(0, ".")
from tests.gpu.test_short_stack_gpu import weights, tables, HEADS, KV_HEADS, HIDDEN, INTER, HEAD_DIM
from tests.gpu.op_checks import randn
from voxcpm_triton.ops import library as lib, short_stack
for layers, m, T in ((1, 22, 11), (2, 22, 11), (1, 5, 5)):
    w = weights(layers, seed=100)
    x = randn(m, HIDDEN, dtype=torch.bfloat16, seed=7)
    cos, sin = tables(T, HEAD_DIM)
    n = lib.library().voxcpm_short_stack_workspace_bytes(m, HEADS, KV_HEADS, HEAD_DIM, INTER)
    ws = torch.zeros(n, dtype=torch.uint8, device="cuda")
    counters = torch.zeros(16, dtype=torch.int32, device="cuda")
    table = torch.tensor([t.data_ptr() for t in w], dtype=torch.int64, device="cuda")
    out = x.clone()
    t0 = time.time()
    err = lib.library().voxcpm_short_stack(out.data_ptr(), table.data_ptr(), layers, cos.data_ptr(), sin.data_ptr(), ws.data_ptr(), n,
        counters.data_ptr(), m, T, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, 1e-6, 0.6, 1 / math.sqrt(HEAD_DIM), 2, torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    ref = short_stack.short_stack_ref(x, w, T, HEADS, KV_HEADS, 1e-6, 0.6, cos, sin)
    c = counters.tolist()
    print(f"layers {layers} m {m}: launch {err}, {time.time()-t0:.2f} s, counters {c[:3]}, watch set {c[4]} block {c[5]} thread {c[6]} what {c[7]}, max|out-ref| {(out.float()-ref.float()).abs().max().item():.4g}", flush=True)
