# One layer of the short_stack kernel with its workspace inspected stage by stage against the references.
import math, sys, torch
sys.path.insert(0, ".")
from tests.gpu.test_short_stack_gpu import weights, tables, HEADS, KV_HEADS, HIDDEN, INTER, HEAD_DIM
from tests.gpu.op_checks import randn
from voxcpm_triton.ops import library as lib, short_stack
from voxcpm_triton.ops.skinny_linear import skinny_gemm_ref, ROW_RMS, RESIDUAL, SWIGLU
from voxcpm_triton.ops.short_attention import short_attention_ref
torch.manual_seed(0)
w = weights(1, seed=100)
for m, T in ((22, 11), (5, 5), (1, 1)):
    x = randn(m, HIDDEN, dtype=torch.bfloat16, seed=7)
    cos, sin = tables(T, HEAD_DIM)
    qkv_cols = (HEADS + 2 * KV_HEADS) * HEAD_DIM
    n = lib.library().voxcpm_short_stack_workspace_bytes(m, HEADS, KV_HEADS, HEAD_DIM, INTER)
    ws = torch.zeros(n // 2, dtype=torch.bfloat16, device="cuda")
    counters = torch.zeros(3, dtype=torch.int32, device="cuda")
    table = torch.tensor([t.data_ptr() for t in w], dtype=torch.int64, device="cuda")
    out = x.clone()
    err = lib.library().voxcpm_short_stack(out.data_ptr(), table.data_ptr(), 1, cos.data_ptr(), sin.data_ptr(), ws.data_ptr(), n,
        counters.data_ptr(), m, T, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, 1e-6, 0.6, 1 / math.sqrt(HEAD_DIM), 2, torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    print("m", m, "error", err, "counters", counters.tolist())
    qkv_k = ws[: m * qkv_cols].view(m, qkv_cols)
    attn_k = ws[m * qkv_cols: m * (qkv_cols + HEADS * HEAD_DIM)].view(m, HEADS * HEAD_DIM)
    act_k = ws[m * (qkv_cols + HEADS * HEAD_DIM):].view(m, INTER)
    qkv = skinny_gemm_ref(x, w[0], ROW_RMS, w[4], 1e-6)
    attn = short_attention_ref(qkv_k, T, HEADS, KV_HEADS, cos, sin)
    x1 = skinny_gemm_ref(attn_k, w[1], RESIDUAL, residual=x, residual_scale=0.6)
    act = skinny_gemm_ref(x1, w[2], SWIGLU | ROW_RMS, w[5], 1e-6)
    x2 = skinny_gemm_ref(act_k, w[3], RESIDUAL, residual=x1, residual_scale=0.6)
    def d(a, b): return f"max|d| {(a.float()-b.float()).abs().max().item():.4g} scale {b.float().abs().max().item():.3g}"
    print(" qkv ", d(qkv_k, qkv))
    print(" attn", d(attn_k, attn), "(from the kernel's qkv)")
    print(" act ", d(act_k, act), "(from reference x1)")
    print(" out ", d(out, x2), "(from the kernel's act, reference x1)")
