"""Times each CUDA op of libvoxcpm_kernels against its PyTorch baseline, eager and torch.compile'd,
on VoxCPM2 shapes (bf16; snake on the vocoder's activations), every variant inside a replayed CUDA
graph as the engine runs them.

    python perf/bench_ops.py --out results.json [--dtype bf16] [--no-compile] [--quick]

Prints a table (us per call, achieved GB/s of the kernel for the bytes it must move, speed-up over
the compiled baseline) and writes every number to the JSON file. Baselines are the ops' references,
except where the reference cannot run inside a CUDA graph (host loops or data-dependent indexing):
decode attention and RoPE + KV write are timed against the PyTorch formulation the model uses
(gather the slots' cache rows up to the longest live length, masked SDPA; index_put of the new rows),
and short attention against the path the model ran before it (rope_kv_write, head transposes, SDPA).
On FP8-capable GPUs (bf16 runs) fp8_linear is timed against bf16 F.linear at the LocDiT's GEMM
shapes for 16, 64 and 256 streams (TFLOP/s printed after the row), and quantize_fp8 alone.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from perf.cuda_required import cuda_missing  # noqa: E402
from voxcpm_triton import ops  # noqa: E402
from voxcpm_triton.ops import library  # noqa: E402
from voxcpm_triton.ops.quantize_fp8 import NONE, SWIGLU  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
DEVICE = "cuda"
LOCDIT_TOKENS = 9 * 2  # LocDiT sequence per stream, both CFG branches
# GEMM rows of the VoxCPM2 LocDiT per stream: 11 positions (2 mu, time, 4 cond, 4 noisy) x CFG.
LOCDIT_GEMM_ROWS = 22
# (k, n) of its qkv, o_proj, gate_up and down_proj.
LOCDIT_GEMMS = ((1024, 2560), (2048, 1024), (1024, 8192), (4096, 1024))


@dataclass
class Case:
    op: str
    label: str
    kernel: Callable[[], object]
    baseline: Callable[[], object]
    bytes_moved: int  # fewest bytes the op must read + write
    flops: int = 0  # GEMMs: multiply-adds x 2, for TFLOP/s


def rand(*shape: int, dtype: torch.dtype, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, device=DEVICE) * scale).to(dtype)


def nbytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def rmsnorm_case(rows: int, hidden: int, dtype: torch.dtype) -> Case:
    x, residual, weight = rand(rows, hidden, dtype=dtype), rand(rows, hidden, dtype=dtype), rand(hidden, dtype=dtype)
    return Case("add_rmsnorm", f"rows={rows} hidden={hidden}",
                lambda: ops.add_rmsnorm(x, residual, weight, 1e-5),
                lambda: ops.add_rmsnorm_ref(x, residual, weight, 1e-5),
                nbytes(x, residual, weight) + 2 * nbytes(x))


def row_scale_case(rows: int, hidden: int, dtype: torch.dtype) -> Case:
    x = rand(rows, hidden, dtype=dtype)
    return Case("row_scale", f"rows={rows} hidden={hidden}",
                lambda: ops.row_scale(x, 1e-5), lambda: ops.row_scale_ref(x, 1e-5), nbytes(x) + rows * 4)


def locdit_sequence_case(batch: int, dtype: torch.dtype) -> Case:
    # VoxCPM2's LocDiT input: 2 mu tokens, the time token, 4 condition and 4 noisy tokens, per branch.
    mu_pair, time = rand(2, batch, 2 * 1024, dtype=dtype), rand(1024, dtype=dtype)
    cond, x = rand(batch, 4, 1024, dtype=dtype), rand(batch, 4, 1024, dtype=dtype)
    out_bytes = 2 * batch * 11 * 1024 * x.element_size()
    return Case("locdit_sequence", f"batch={batch} [2x{batch},11,1024]",
                lambda: ops.locdit_sequence(mu_pair, time, cond, x),
                lambda: ops.locdit_sequence_ref(mu_pair, time, cond, x), nbytes(mu_pair, time, cond, x) + out_bytes)


def step_state_cases(batch: int, dtype: torch.dtype) -> list[Case]:
    """The step's gather and scatter of VoxCPM2's per-slot state (hidden 2048, 4 x 64 patches) in
    tables of 256 slots."""
    rows = 257
    ring, prev = rand(rows, 32, 64, 4, dtype=dtype), rand(rows, 4, 64, dtype=dtype)
    lm, residual = rand(rows, 2048, dtype=dtype), rand(rows, 2048, dtype=dtype)
    cfg, positions = torch.rand(rows, device=DEVICE), torch.zeros(rows, dtype=torch.int64, device=DEVICE)
    index = torch.stack((torch.arange(batch), torch.arange(batch) % 32)).to(DEVICE)
    tables = (ring, lm, residual, prev, cfg, positions)
    results = (rand(batch, 2048, dtype=dtype), rand(batch, 2048, dtype=dtype), rand(batch, 4, 64, dtype=dtype),
               rand(batch, 2, dtype=dtype))
    lengths = torch.ones(batch, dtype=torch.int32, device=DEVICE)
    row_bytes = (2 * 2048 + 2 * 256) * lm.element_size() + 16  # per batch row: its state and scalars
    out_bytes = batch * (256 + 1) * 4
    return [Case("step_gather", f"batch={batch}", lambda: ops.step_gather(index, *tables),
                 lambda: ops.step_gather_ref(index, *tables), 2 * batch * row_bytes),
            Case("step_scatter", f"batch={batch}", lambda: ops.step_scatter(index, lengths, *results, lm, residual,
                                                                           prev, positions),
                 lambda: ops.step_scatter_ref(index, lengths, *results, lm, residual, prev, positions),
                 2 * batch * row_bytes + out_bytes)]


def swiglu_case(rows: int, inter: int, dtype: torch.dtype) -> Case:
    gate_up = rand(rows, 2 * inter, dtype=dtype)
    return Case("swiglu", f"rows={rows} inter={inter}", lambda: ops.swiglu(gate_up),
                lambda: ops.swiglu_ref(gate_up), nbytes(gate_up) * 3 // 2)


def fsq_case(rows: int, dtype: torch.dtype) -> Case:
    h = rand(rows, 512, dtype=dtype)
    return Case("fsq", f"rows={rows} dim=512", lambda: ops.fsq(h, 9.0), lambda: ops.fsq_ref(h, 9.0), 2 * nbytes(h))


def cfg_euler_case(batch: int, dtype: torch.dtype) -> Case:
    x, v_cond, v_uncond = (rand(batch, 64, 4, dtype=dtype) for _ in range(3))
    cfg = torch.full((batch,), 2.0, device=DEVICE)
    dt = torch.full((batch,), 0.001, device=DEVICE)
    return Case("cfg_euler_step", f"batch={batch} [64,4]", lambda: ops.cfg_euler_step(x, v_cond, v_uncond, cfg, dt),
                lambda: ops.cfg_euler_step_ref(x, v_cond, v_uncond, cfg, dt), 4 * nbytes(x))


def snake_case(batch: int, channels: int, length: int, dtype: torch.dtype) -> Case:
    x = rand(batch, channels, length, dtype=dtype)
    alpha = (torch.rand(channels, device=DEVICE) + 0.5).to(dtype)
    return Case("snake", f"[{batch},{channels},{length}]", lambda: ops.snake(x, alpha),
                lambda: ops.snake_ref(x, alpha), 2 * nbytes(x) + nbytes(alpha))


def snake_depthwise_conv_case(batch: int, channels: int, length: int, dilation: int, dtype: torch.dtype) -> Case:
    x = rand(batch, channels, length, dtype=dtype)
    weight, bias = rand(channels, 1, 7, dtype=dtype, scale=0.4), rand(channels, dtype=dtype)
    alpha = (torch.rand(channels, device=DEVICE) + 0.5).to(dtype)
    return Case("snake_dwconv", f"[{batch},{channels},{length}] d={dilation}",
                lambda: ops.snake_depthwise_conv(x, alpha, weight, bias, dilation),
                lambda: ops.snake_depthwise_conv_ref(x, alpha, weight, bias, dilation), 2 * nbytes(x))


def rope_tables(max_len: int, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2, device=DEVICE).float() / head_dim))
    angles = torch.outer(torch.arange(max_len, device=DEVICE).float(), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def rope_baseline(q, k, v, k_cache, v_cache, positions, slots, cos, sin):
    """The model's PyTorch decode path: rotate in fp32, index_put the new rows."""
    c, s = cos[positions][:, None, :], sin[positions][:, None, :]

    def rotate(x):
        x32 = x.float()
        first, second = x32.chunk(2, dim=-1)
        return (x32 * c + torch.cat((-second, first), dim=-1) * s).to(x.dtype)

    k_cache[slots, :, positions] = rotate(k)
    v_cache[slots, :, positions] = v
    return rotate(q)


def rope_case(batch: int, dtype: torch.dtype) -> Case:
    q_heads, kv_heads, head_dim, max_len = 16, 2, 128, 1024
    qkv = rand(batch, (q_heads + 2 * kv_heads) * head_dim, dtype=dtype)
    q, k, v = qkv.split([q_heads * head_dim, kv_heads * head_dim, kv_heads * head_dim], dim=-1)
    q, k, v = q.view(batch, q_heads, head_dim), k.view(batch, kv_heads, head_dim), v.view(batch, kv_heads, head_dim)
    k_cache = rand(batch, kv_heads, max_len, head_dim, dtype=dtype)
    v_cache = rand(batch, kv_heads, max_len, head_dim, dtype=dtype)
    cos, sin = rope_tables(max_len, head_dim)
    positions = torch.randint(0, max_len, (batch,), device=DEVICE, dtype=torch.int32)
    slots = torch.arange(batch, device=DEVICE, dtype=torch.int32)
    positions64, slots64 = positions.long(), slots.long()
    return Case("rope_kv_write", f"batch={batch} 16q/2kv x128",
                lambda: ops.rope_kv_write(q, k, v, k_cache, v_cache, positions, slots, cos, sin),
                lambda: rope_baseline(q, k, v, k_cache, v_cache, positions64, slots64, cos, sin),
                2 * nbytes(qkv) + 2 * batch * head_dim * 4 * 2)


def attention_baseline(q, k_cache, v_cache, slots, lengths, span):
    """The model's PyTorch decode path: gather the slots' rows up to the longest live length, mask."""
    keys, values = k_cache[slots, :, :span], v_cache[slots, :, :span]
    live = torch.arange(span, device=q.device)[None, :] < lengths[:, None]
    out = F.scaled_dot_product_attention(q[:, :, None], keys, values, attn_mask=live[:, None, None, :], enable_gqa=True)
    return out[:, :, 0]


def attention_case(batch: int, length: int, dtype: torch.dtype) -> Case:
    q_heads, kv_heads, head_dim = 16, 2, 128
    max_len = 2048
    q = rand(batch, q_heads, head_dim, dtype=dtype)
    k_cache = rand(batch, kv_heads, max_len, head_dim, dtype=dtype)
    v_cache = rand(batch, kv_heads, max_len, head_dim, dtype=dtype)
    slots = torch.arange(batch, device=DEVICE, dtype=torch.int32)
    # Ragged: lengths spread over [length / 2, length].
    lengths = torch.linspace(length // 2, length, batch, device=DEVICE).int()
    slots64, lengths64 = slots.long(), lengths.long()
    live_bytes = int(lengths.sum()) * kv_heads * head_dim * 2 * k_cache.element_size()
    return Case("decode_attention", f"batch={batch} len<={length}",
                lambda: ops.decode_attention(q, k_cache, v_cache, slots, lengths),
                lambda: attention_baseline(q, k_cache, v_cache, slots64, lengths64, int(lengths.max())),
                live_bytes + 2 * nbytes(q))


def rope_sdpa_baseline(qkv, seq_len, q_heads, kv_heads, cos, sin, no_cache, positions, no_slot):
    """The custom-ops model path short_attention replaced: rope_kv_write (no cache rows), SDPA."""
    tokens, width = qkv.shape
    head_dim = width // (q_heads + 2 * kv_heads)
    sequences = tokens // seq_len
    heads = qkv.view(tokens, q_heads + 2 * kv_heads, head_dim)
    rotated = ops.rope_kv_write(heads[:, :q_heads + kv_heads], heads[:, q_heads:q_heads + kv_heads],
                                heads[:, q_heads + kv_heads:], no_cache[0], no_cache[1], positions, no_slot, cos, sin)
    q = rotated[:, :q_heads].view(sequences, seq_len, q_heads, head_dim).transpose(1, 2)
    k = rotated[:, q_heads:].view(sequences, seq_len, kv_heads, head_dim).transpose(1, 2)
    v = heads[:, q_heads + kv_heads:].reshape(sequences, seq_len, kv_heads, head_dim).transpose(1, 2)
    out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    return out.transpose(1, 2).reshape(tokens, q_heads * head_dim)


def short_attention_case(sequences: int, seq_len: int, dtype: torch.dtype) -> Case:
    q_heads, kv_heads, head_dim = 16, 2, 128  # VoxCPM2's LocEnc / LocDiT (kv_channels 128)
    qkv = rand(sequences * seq_len, (q_heads + 2 * kv_heads) * head_dim, dtype=dtype)
    cos, sin = rope_tables(seq_len, head_dim)
    no_cache = [torch.zeros(1, kv_heads, 1, head_dim, device=DEVICE, dtype=dtype) for _ in range(2)]
    positions = torch.arange(seq_len, device=DEVICE, dtype=torch.int32).repeat(sequences)
    no_slot = torch.full_like(positions, -1)
    out_bytes = sequences * seq_len * q_heads * head_dim * qkv.element_size()
    return Case("short_attention", f"seqs={sequences} len={seq_len} 16q/2kv",
                lambda: ops.short_attention(qkv, seq_len, q_heads, kv_heads, cos, sin),
                lambda: rope_sdpa_baseline(qkv, seq_len, q_heads, kv_heads, cos, sin, no_cache, positions, no_slot),
                nbytes(qkv, cos, sin) + out_bytes)


def linear_case(rows: int, k: int, n: int, epilogue: int, dtype: torch.dtype) -> Case:
    """skinny_gemm against F.linear (+ the swiglu op): each call takes the next of 20 weight copies,
    as a step's layers each bring their own weight, so one timed graph does not serve them from L2
    (copies of the smallest weights still fit in it together: read those rows as optimistic)."""
    x = rand(rows, k, dtype=dtype)
    weights = [rand(n, k, dtype=dtype, scale=k ** -0.5) for _ in range(20)]
    turn = itertools.count()

    def weight() -> torch.Tensor:
        return weights[next(turn) % len(weights)]

    swiglu = epilogue == ops.skinny_linear.SWIGLU
    out_cols = n // 2 if swiglu else n
    baseline = ((lambda: ops.swiglu(F.linear(x, weight()))) if swiglu else (lambda: F.linear(x, weight())))
    return Case("skinny_gemm" + ("+swiglu" if swiglu else ""), f"rows={rows} k={k} n={n}",
                lambda: ops.skinny_gemm(x, weight(), epilogue), baseline,
                nbytes(x, weights[0]) + rows * out_cols * x.element_size())


def normed_linear_case(rows: int, k: int, n: int, swiglu: bool, dtype: torch.dtype) -> Case:
    """skinny_gemm with the RMSNorm inside (ROW_RMS) against the rmsnorm op followed by the plain
    or SwiGLU kernel, weights rotated as in linear_case."""
    x = rand(rows, k, dtype=dtype)
    gain = rand(k, dtype=dtype)
    weights = [rand(n, k, dtype=dtype, scale=k ** -0.5) for _ in range(20)]
    turn = itertools.count()
    sg = ops.skinny_linear
    epilogue = sg.SWIGLU if swiglu else sg.PLAIN

    def weight() -> torch.Tensor:
        return weights[next(turn) % len(weights)]

    return Case("skinny_gemm" + ("+swiglu" if swiglu else "") + "+rms", f"rows={rows} k={k} n={n}",
                lambda: sg.skinny_gemm(x, weight(), epilogue | sg.ROW_RMS, gain, 1e-6),
                lambda: sg.skinny_gemm(ops.rmsnorm(x, gain, 1e-6), weight(), epilogue),
                nbytes(x, gain, weights[0]) + rows * (n // 2 if swiglu else n) * x.element_size())


def fp8_linear_case(rows: int, k: int, n: int, swiglu: bool) -> Case:
    """fp8_linear (per-row quantisation + torch._scaled_mm) against bf16 F.linear, weights rotated
    as in linear_case. swiglu: the down projection fed the gate_up output [rows, 2k], quantised with
    SwiGLU folded in, against the swiglu op + F.linear."""
    x = rand(rows, 2 * k if swiglu else k, dtype=torch.bfloat16)
    weights = [rand(n, k, dtype=torch.bfloat16, scale=k ** -0.5) for _ in range(20)]
    fp8_weights = [ops.quantize_weight(w, min_rows=1) for w in weights]
    turn = itertools.count()
    activation = SWIGLU if swiglu else NONE
    kernel = lambda: ops.fp8_linear(x, fp8_weights[next(turn) % len(weights)], activation)  # noqa: E731
    if swiglu:
        baseline = lambda: F.linear(ops.swiglu(x), weights[next(turn) % len(weights)])  # noqa: E731
    else:
        baseline = lambda: F.linear(x, weights[next(turn) % len(weights)])  # noqa: E731
    return Case("fp8_linear" + ("+swiglu" if swiglu else ""), f"rows={rows} k={k} n={n}", kernel, baseline,
                nbytes(x) + n * k + rows * n * 2, flops=2 * rows * k * n)


def quantize_fp8_case(rows: int, k: int, swiglu: bool) -> Case:
    x = rand(rows, 2 * k if swiglu else k, dtype=torch.bfloat16)
    activation = SWIGLU if swiglu else NONE
    return Case("quantize_fp8" + ("+swiglu" if swiglu else ""), f"rows={rows} k={k}",
                lambda: ops.quantize_fp8(x, activation), lambda: ops.quantize_fp8_ref(x, activation),
                nbytes(x) + rows * (k + 4))


def fp8_cases() -> list[Case]:
    """The LocDiT's GEMMs at 16, 64 and 256 streams (352 rows: near the FP8 routing threshold),
    FP8 against bf16, and the quantisation alone."""
    cases = []
    for streams in (16, 64, 256):
        rows = streams * LOCDIT_GEMM_ROWS
        for k, n in LOCDIT_GEMMS:
            cases.append(fp8_linear_case(rows, k, n, swiglu=False))
        cases.append(fp8_linear_case(rows, 4096, 1024, swiglu=True))
        cases.append(quantize_fp8_case(rows, 1024, swiglu=False))
        cases.append(quantize_fp8_case(rows, 4096, swiglu=True))
    return cases


def build_cases(dtype: torch.dtype, quick: bool) -> list[Case]:
    batches = (1, 64) if quick else (1, 16, 64, 256)
    cases = []
    for b in batches:
        cases.append(rmsnorm_case(b, 2048, dtype))
        cases.append(rmsnorm_case(b * LOCDIT_TOKENS, 1024, dtype))
        cases.append(row_scale_case(b * LOCDIT_GEMM_ROWS, 1024, dtype))  # what the folded norms leave of it
        cases.append(swiglu_case(b, 6144, dtype))
        cases.append(swiglu_case(b * LOCDIT_TOKENS, 4096, dtype))
        cases.append(rope_case(b, dtype))
        cases.append(short_attention_case(2 * b, 11, dtype))  # LocDiT v2 (2 mu, time, 4 cond, 4 noisy) x CFG
        cases.append(short_attention_case(b, 5, dtype))  # LocEnc of one patch
        cases.append(locdit_sequence_case(b, dtype))
        for length in (300, 1000):
            cases.append(attention_case(b, length, dtype))
        cases.append(cfg_euler_case(b, dtype))
        cases.extend(step_state_cases(b, dtype))
        cases.append(fsq_case(b, dtype))
        # Vocoder activations (trimmed windows): the last decoder block's residual units, and a mid block's.
        cases.append(snake_case(b, 32, 7766, dtype))
        cases.append(snake_case(b, 256, 1115, dtype))
        cases.append(snake_depthwise_conv_case(b, 32, 7766, 9, dtype))
        cases.append(snake_depthwise_conv_case(b, 256, 1115, 3, dtype))
        plain, fused = ops.skinny_linear.PLAIN, ops.skinny_linear.SWIGLU
        if b <= ops.skinny_linear.MAX_ROWS and dtype != torch.float32:
            # LM decode (one row per stream): qkv, o, gate_up + SwiGLU, down.
            for k, n, epilogue in ((2048, 2560, plain), (2048, 2048, plain), (2048, 12288, fused), (6144, 2048, plain)):
                cases.append(linear_case(b, k, n, epilogue, dtype))
        if b == 1 and dtype != torch.float32:  # LocDiT at one stream: 22 rows (11 tokens x CFG)
            for k, n, epilogue in ((1024, 2560, plain), (2048, 1024, plain), (1024, 8192, fused), (4096, 1024, plain)):
                cases.append(linear_case(22, k, n, epilogue, dtype))
            cases.append(normed_linear_case(22, 1024, 2560, False, dtype))  # LocDiT qkv with its input norm
            cases.append(normed_linear_case(22, 1024, 8192, True, dtype))  # LocDiT gate_up with its norm
    if dtype == torch.bfloat16 and torch.cuda.get_device_capability() >= (8, 9):
        cases.extend(fp8_cases())
    return cases


def graph_time_us(fn: Callable[[], object], inner: int = 20, reps: int = 30) -> float:
    """Median time per call of `fn` replayed `inner` times inside one CUDA graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(inner):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0 / inner)
    return statistics.median(samples)


def cold_time_us(call: Callable[[torch.Tensor], object], weights: list[torch.Tensor], replays: int = 20) -> float:
    """Device us per call(w) with its weight cold, as a step reads each layer's: one call per weight
    copy, back to back in one CUDA graph (copies enough to outgrow L2), replayed `replays` times.
    graph_time_us replays one call on one set of operands, so its weights answer from L2."""
    call(weights[0])
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for w in weights:
            call(w)
    for _ in range(3):
        graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000 / (replays * len(weights))


def measure(fn: Callable[[], object]) -> tuple[float | None, str | None]:
    try:
        return graph_time_us(fn), None
    except Exception as error:  # a baseline that cannot be captured is reported, not fatal
        torch.cuda.synchronize()
        return None, f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"


def fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="JSON file for the results")
    parser.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile'd baselines")
    parser.add_argument("--quick", action="store_true", help="batches 1 and 64 only")
    parser.add_argument("--ops", default="", help="comma-separated op names: only those cases (default: all)")
    args = parser.parse_args()
    only = {name for name in args.ops.split(",") if name}
    if cuda_missing("bench_ops"):
        return 2
    if library.library() is None:
        print(f"bench_ops: kernels library not loaded ({library.library_status()})", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    dtype = DTYPES[args.dtype]
    results = []
    header = f"{'op':<17} {'case':<26} {'kernel us':>9} {'GB/s':>7} {'eager us':>9} {'compiled us':>11} {'x eager':>8} {'x compiled':>10}"
    print(header)
    print("-" * len(header))
    cases = build_cases(dtype, args.quick)
    unknown = only - {case.op for case in cases}
    if unknown:
        print(f"bench_ops: --ops names no case of this run: {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    for case in cases:
        if only and case.op not in only:
            continue
        kernel_us, kernel_error = measure(case.kernel)
        eager_us, eager_error = measure(case.baseline)
        compiled_us, compiled_error = (None, "skipped")
        if not args.no_compile:
            torch._dynamo.reset()
            compiled_us, compiled_error = measure(torch.compile(case.baseline, dynamic=False))
        gbps = case.bytes_moved / (kernel_us * 1e3) if kernel_us else None
        tflops = {f"{name}_tflops": case.flops / (us * 1e6) for name, us in (("kernel", kernel_us), ("eager", eager_us))
                  if case.flops and us}
        row = {
            "op": case.op, "case": case.label, "dtype": args.dtype, "kernel_us": kernel_us,
            "eager_us": eager_us, "compiled_us": compiled_us, "bytes": case.bytes_moved, "kernel_gbps": gbps, **tflops,
            "errors": {k: v for k, v in (("kernel", kernel_error), ("eager", eager_error),
                                         ("compiled", compiled_error)) if v},
        }
        results.append(row)
        speed_eager = eager_us / kernel_us if kernel_us and eager_us else None
        speed_compiled = compiled_us / kernel_us if kernel_us and compiled_us else None
        print(f"{case.op:<17} {case.label:<26} {fmt(kernel_us):>9} {fmt(gbps, 0):>7} {fmt(eager_us):>9} "
              f"{fmt(compiled_us):>11} {fmt(speed_eager, 2):>8} {fmt(speed_compiled, 2):>10}"
              + "".join(f"  {name} {value:.0f}" for name, value in tflops.items()), flush=True)
        for name, error in row["errors"].items():
            if error != "skipped":
                print(f"    {name}: {error}", flush=True)
    meta = {
        "device": torch.cuda.get_device_name(), "torch": torch.__version__, "library": library.library_status(),
        "timing": "median of 30 replays of a CUDA graph holding 20 calls; us per call",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
