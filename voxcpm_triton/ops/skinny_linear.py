"""Linear layers over a few activation rows: the skinny_gemm CUDA op and its reference.

At one or a few streams every GEMM of a decoder step has 1 to 32 activation rows (LM decode: one
per stream; LocDiT: 2 x 11 tokens per stream with both CFG branches), so each costs streaming its
weight once; kernels/skinny_gemm.cu does that closer to memory bandwidth than cuBLAS's choices for
these shapes and can fold SwiGLU into the gate_up projection. `linear` and `gate_up_swiglu` pick
the kernel when the shape allows and fall back to lt_gemm.linear (F.linear, or the cuBLASLt
algorithm timed fastest for a shape of many rows; + swiglu) otherwise, so callers need no shape
logic. VOXCPM_SKINNY_GEMM=0 turns the kernel off and VOXCPM_SKINNY_PLAIN_ROWS=N (1..32)
moves the plain-GEMM row limit (A/B measurements).

The kernel can also take a decoder layer's RMSNorm into the GEMM that reads the normalised rows
(`normed_linear`, `normed_gate_up_swiglu`) and the residual add into the GEMM whose output is
added (`linear_residual_`), so a layer at a few rows needs no add_rmsnorm kernel.
"""

from __future__ import annotations

import functools
import os

import torch
import torch.nn.functional as F

from voxcpm_triton.ops import library as lib
from voxcpm_triton.ops import gate_up_sm90, lt_gemm
from voxcpm_triton.ops.rmsnorm import rmsnorm
from voxcpm_triton.ops.swiglu import swiglu_ref

MAX_ROWS = 32
# `linear` routes plain GEMMs to the kernel up to this many rows. Alone, one GEMM at the LocDiT's 22
# rows is slower on it than on cuBLAS (7.6 against 5.1 us for 1024 -> 2560; perf/RESULTS.md run 6).
# In the whole step it is faster, most likely because it joins the chain of programmatic dependent
# launches that cuBLAS's kernels break: 1 / 4 / 16 streams 6.56 / 7.51 / 9.15 -> 6.31 / 7.20 /
# 8.72 ms with 32 instead of 8 (run 16, two interleaved repeats).
PLAIN_MAX_ROWS = int(os.environ.get("VOXCPM_SKINNY_PLAIN_ROWS", "32"))
if not 1 <= PLAIN_MAX_ROWS <= MAX_ROWS:
    raise ValueError(f"VOXCPM_SKINNY_PLAIN_ROWS={PLAIN_MAX_ROWS}; allowed: 1..{MAX_ROWS}")
# Epilogue flags, as in kernels/voxcpm_kernels.h.
PLAIN, SWIGLU, ROW_RMS, RESIDUAL, BIAS = 0, 1, 2, 4, 8
# The widest k whose norm gain ROW_RMS stages in shared memory: the kernel's kMaxNormK
# (kernels/skinny_gemm.cu says why), which refuses wider ones.
NORM_MAX_K = 7648
# Counters are one int32 per 32 weight rows; 4096 covers weights of up to 131072 rows.
COUNTERS = 4096
_KERNEL_DTYPES = (torch.bfloat16, torch.float16)
_counters: dict[torch.device, torch.Tensor] = {}


def skinny_gemm_ref(x: torch.Tensor, weight: torch.Tensor, epilogue: int, norm_weight: torch.Tensor | None = None,
                    rms_eps: float = 0.0, residual: torch.Tensor | None = None,
                    residual_scale: float = 1.0) -> torch.Tensor:
    """What the kernel computes (see voxcpm_skinny_gemm); returns the new residual with RESIDUAL
    (with RESIDUAL | BIAS, `residual` is the bias [n] and broadcasts over the rows)."""
    if epilogue & (ROW_RMS | RESIDUAL) == 0:
        out = F.linear(x, weight)
    else:
        inputs = x * norm_weight if epilogue & ROW_RMS else x
        product = F.linear(inputs.float(), weight.float())
        if epilogue & ROW_RMS:
            product = product * torch.rsqrt(x.float().pow(2).mean(dim=-1, keepdim=True) + rms_eps)
        if epilogue & RESIDUAL:
            product = residual.float() + residual_scale * product
        out = product.to(x.dtype)
    return swiglu_ref(out) if epilogue & SWIGLU else out


@functools.cache
def _tensor_cores(device: torch.device) -> bool:
    return torch.cuda.get_device_capability(device)[0] >= 8


def _counter_buffer(device: torch.device) -> torch.Tensor | None:
    """The zeroed per-device counters the kernel leaves zeroed. Made on first eager use; a CUDA
    graph capture cannot make it (its memory would belong to the graph), so a capture before any
    eager call falls back to F.linear."""
    buffer = _counters.get(device)
    if buffer is None and not torch.cuda.is_current_stream_capturing():
        buffer = _counters[device] = torch.zeros(COUNTERS, dtype=torch.int32, device=device)
    return buffer


def _use_kernel(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether linear / gate_up_swiglu run the CUDA kernel for x [m, k] @ weight[n, k]^T."""
    if torch.compiler.is_compiling() or os.environ.get("VOXCPM_SKINNY_GEMM", "1") == "0":
        return False
    return _kernel_takes(x, weight)


def _kernel_takes(x: torch.Tensor, weight: torch.Tensor) -> bool:
    if not (lib.kernel_ready(x) and x.dtype in _KERNEL_DTYPES and weight.dtype == x.dtype
            and weight.device == x.device and _tensor_cores(x.device)):
        return False
    m, k = x.shape
    n = weight.shape[0]
    return (1 <= m <= MAX_ROWS and k % 32 == 0 and n % 32 == 0 and n // 32 <= COUNTERS and weight.dim() == 2
            and weight.shape[1] == k and x.is_contiguous() and weight.is_contiguous()
            and x.data_ptr() % 16 == 0 and weight.data_ptr() % 16 == 0
            and _counter_buffer(x.device) is not None)


def _launch(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, epilogue: int, norm_weight: torch.Tensor | None,
            rms_eps: float, residual: torch.Tensor | None, residual_scale: float) -> None:
    m, k = x.shape
    n = weight.shape[0]
    kernels = lib.library()
    with lib.device_of(x):
        nbytes = kernels.voxcpm_skinny_gemm_workspace_bytes(m, n, k, epilogue)
        workspace = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=x.device)
        error = kernels.voxcpm_skinny_gemm(lib.ptr(x), lib.ptr(weight), lib.ptr(out), lib.ptr(norm_weight), rms_eps,
                                           lib.ptr(residual), residual_scale, lib.ptr(workspace), nbytes,
                                           lib.ptr(_counter_buffer(x.device)), m, n, k, epilogue, lib.dtype_code(x),
                                           lib.stream_of(x))
    lib.check(error, "skinny_gemm")


@torch.library.custom_op("voxcpm::skinny_gemm", mutates_args=(),
                         schema="(Tensor x, Tensor weight, int epilogue, Tensor? norm_weight, float rms_eps) -> Tensor")
def _skinny_gemm_op(x: torch.Tensor, weight: torch.Tensor, epilogue: int, norm_weight: torch.Tensor | None,
                    rms_eps: float) -> torch.Tensor:
    if not lib.kernel_ready(x):
        return skinny_gemm_ref(x, weight, epilogue, norm_weight, rms_eps)
    out = x.new_empty((x.shape[0], weight.shape[0] // 2 if epilogue & SWIGLU else weight.shape[0]))
    _launch(x, weight, out, epilogue, norm_weight, rms_eps, None, 1.0)
    return out


@_skinny_gemm_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, epilogue: int, norm_weight: torch.Tensor | None,
      rms_eps: float) -> torch.Tensor:
    n = weight.shape[0]
    return x.new_empty((x.shape[0], n // 2 if epilogue & SWIGLU else n))


@torch.library.custom_op("voxcpm::skinny_gemm_residual_", mutates_args=("residual",),
                         schema="(Tensor x, Tensor weight, Tensor(a!) residual, float residual_scale) -> ()")
def _skinny_gemm_residual_op(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor,
                             residual_scale: float) -> None:
    if not lib.kernel_ready(x):
        residual.copy_(skinny_gemm_ref(x, weight, RESIDUAL, residual=residual, residual_scale=residual_scale))
        return
    _launch(x, weight, residual, RESIDUAL, None, 0.0, residual, residual_scale)


@_skinny_gemm_residual_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor, residual_scale: float) -> None:
    return None


@torch.library.custom_op("voxcpm::skinny_gemm_bias", mutates_args=(),
                         schema="(Tensor x, Tensor weight, Tensor bias) -> Tensor")
def _skinny_gemm_bias_op(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    if not lib.kernel_ready(x):
        return skinny_gemm_ref(x, weight, RESIDUAL | BIAS, residual=bias)
    out = x.new_empty((x.shape[0], weight.shape[0]))
    _launch(x, weight, out, RESIDUAL | BIAS, None, 0.0, bias, 1.0)
    return out


@_skinny_gemm_bias_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return x.new_empty((x.shape[0], weight.shape[0]))


def _check(x: torch.Tensor, weight: torch.Tensor, name: str) -> None:
    lib.require(x.dim() >= 1 and weight.dim() == 2 and x.shape[-1] == weight.shape[1],
                f"{name} must be [out_features, {x.shape[-1] if x.dim() else '?'}] for x of shape {tuple(x.shape)}, "
                f"got {tuple(weight.shape)}")


def skinny_gemm(x: torch.Tensor, weight: torch.Tensor, epilogue: int = PLAIN, norm_weight: torch.Tensor | None = None,
                rms_eps: float = 0.0) -> torch.Tensor:
    """The op itself: x [m <= 32, k] contiguous bf16/fp16 on a compute capability >= 8 GPU, k and
    weight's rows multiples of 32; epilogue PLAIN or SWIGLU, plus ROW_RMS with the RMSNorm's
    norm_weight [k] and eps. Prefer `linear` / `gate_up_swiglu` / `normed_*`, which fall back on
    shapes the kernel does not take."""
    _check(x, weight, "weight")
    lib.require(epilogue in (PLAIN, SWIGLU, ROW_RMS, SWIGLU | ROW_RMS),
                f"epilogue must be PLAIN ({PLAIN}) or SWIGLU ({SWIGLU}), optionally + ROW_RMS ({ROW_RMS}); "
                f"got {epilogue}")
    lib.require(x.dim() == 2 and 1 <= x.shape[0] <= MAX_ROWS,
                f"x must be [rows, k] with 1 <= rows <= {MAX_ROWS}, got {tuple(x.shape)}")
    if epilogue & ROW_RMS:
        _check_norm(x, norm_weight, rms_eps)
        lib.require(not lib.kernel_ready(x) or x.shape[1] <= NORM_MAX_K,
                    f"ROW_RMS on the GPU takes k <= {NORM_MAX_K}, got {x.shape[1]}")
    if lib.kernel_ready(x):
        lib.require(_kernel_takes(x, weight),
                    f"skinny_gemm on the GPU needs contiguous, 16-byte aligned {_KERNEL_DTYPES} tensors of one "
                    f"dtype, k and out_features multiples of 32 and compute capability >= 8; got x "
                    f"{tuple(x.shape)} {x.dtype}, weight {tuple(weight.shape)} {weight.dtype}")
    return torch.ops.voxcpm.skinny_gemm(x, weight, epilogue, norm_weight if epilogue & ROW_RMS else None, rms_eps)


def _check_norm(x: torch.Tensor, norm_weight: torch.Tensor | None, eps: float) -> None:
    lib.require(norm_weight is not None and norm_weight.shape == (x.shape[-1],) and norm_weight.dtype == x.dtype
                and norm_weight.device == x.device and norm_weight.is_contiguous(),
                f"norm_weight must be a contiguous [{x.shape[-1]}] {x.dtype} tensor on {x.device}, got "
                f"{None if norm_weight is None else (tuple(norm_weight.shape), norm_weight.dtype)}")
    lib.require(eps >= 0, f"rms_eps must be >= 0, got {eps}")


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear(x, weight, bias), through the skinny_gemm kernel for up to PLAIN_MAX_ROWS rows when
    it takes the shape (the bias added in its epilogue, before the one rounding)."""
    _check(x, weight, "weight")
    flat = x.reshape(-1, x.shape[-1])
    if flat.shape[0] > PLAIN_MAX_ROWS or not _use_kernel(flat, weight) or not _bias_fits(bias, weight):
        return lt_gemm.linear(flat, weight, bias).view(*x.shape[:-1], weight.shape[0])
    if bias is None:
        out = torch.ops.voxcpm.skinny_gemm(flat, weight, PLAIN, None, 0.0)
    else:
        out = torch.ops.voxcpm.skinny_gemm_bias(flat, weight, bias)
    return out.view(*x.shape[:-1], weight.shape[0])


def _bias_fits(bias: torch.Tensor | None, weight: torch.Tensor) -> bool:
    """Whether the kernel adds this bias (VOXCPM_SKINNY_BIAS=0, for A/B measurements: never)."""
    if bias is None:
        return True
    return (os.environ.get("VOXCPM_SKINNY_BIAS", "1") != "0" and bias.shape == (weight.shape[0],)
            and bias.dtype == weight.dtype and bias.device == weight.device and bias.is_contiguous())


def gate_up_swiglu(x: torch.Tensor, gate_up_weight: torch.Tensor,
                   interleaved: torch.Tensor | None = None) -> torch.Tensor:
    """swiglu(F.linear(x, gate_up_weight)) for a fused [gate; up] weight, in one kernel when the
    skinny_gemm kernel takes the shape, or for many rows the CUTLASS one given the weight's
    interleaved copy (gate_up_sm90)."""
    _check_gate_up(x, gate_up_weight)
    flat = x.reshape(-1, x.shape[-1])
    if not _use_kernel(flat, gate_up_weight):
        out = gate_up_sm90.gate_up_swiglu(flat, gate_up_weight, interleaved)
    else:
        out = torch.ops.voxcpm.skinny_gemm(flat, gate_up_weight, SWIGLU, None, 0.0)
    return out.view(*x.shape[:-1], gate_up_weight.shape[0] // 2)


def _check_gate_up(x: torch.Tensor, gate_up_weight: torch.Tensor) -> None:
    _check(x, gate_up_weight, "gate_up_weight")
    lib.require(gate_up_weight.shape[0] % 2 == 0,
                f"gate_up_weight must have an even number of rows, got {gate_up_weight.shape[0]}")


def takes_normed(x: torch.Tensor, weight: torch.Tensor | None) -> bool:
    """Whether normed_linear / normed_gate_up_swiglu / linear_residual_ run on the kernel for rows
    x [..., k] and this weight (else they fall back to separate norm, GEMM and add kernels), and
    VOXCPM_SKINNY_NORMS=0 (A/B measurements) does not keep the norms out of it."""
    if weight is None or os.environ.get("VOXCPM_SKINNY_NORMS", "1") == "0":
        return False
    return _normed_kernel(x.reshape(-1, x.shape[-1]), weight)


def _normed_kernel(flat: torch.Tensor, weight: torch.Tensor, norm_weight: torch.Tensor | None = None) -> bool:
    """Whether the kernel takes these rows with the norm inside (a norm weight it cannot stage, one
    not 16-byte aligned, sends the call to the separate kernels)."""
    if norm_weight is not None and norm_weight.data_ptr() % 16 != 0:
        return False
    return flat.shape[1] <= NORM_MAX_K and _use_kernel(flat, weight)


def normed_linear(x: torch.Tensor, weight: torch.Tensor, norm_weight: torch.Tensor, eps: float) -> torch.Tensor:
    """F.linear(rms_norm(x, norm_weight, eps), weight) in one kernel when it takes the shape (the
    norm's two roundings become one of x * norm_weight and the fp32 row scale after the GEMM)."""
    _check(x, weight, "weight")
    _check_norm(x, norm_weight, eps)
    flat = x.reshape(-1, x.shape[-1])
    if not _normed_kernel(flat, weight, norm_weight):
        return F.linear(rmsnorm(x, norm_weight, eps), weight)
    return torch.ops.voxcpm.skinny_gemm(flat, weight, ROW_RMS, norm_weight, eps).view(*x.shape[:-1], weight.shape[0])


def normed_gate_up_swiglu(x: torch.Tensor, gate_up_weight: torch.Tensor, norm_weight: torch.Tensor,
                          eps: float) -> torch.Tensor:
    """gate_up_swiglu(rms_norm(x, norm_weight, eps), gate_up_weight), in one kernel when it takes the shape."""
    _check_gate_up(x, gate_up_weight)
    _check_norm(x, norm_weight, eps)
    flat = x.reshape(-1, x.shape[-1])
    if not _normed_kernel(flat, gate_up_weight, norm_weight):
        return gate_up_swiglu(rmsnorm(x, norm_weight, eps), gate_up_weight)
    out = torch.ops.voxcpm.skinny_gemm(flat, gate_up_weight, SWIGLU | ROW_RMS, norm_weight, eps)
    return out.view(*x.shape[:-1], gate_up_weight.shape[0] // 2)


def linear_residual_(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor, scale: float) -> torch.Tensor:
    """residual += scale * F.linear(x, weight), in place, rounded once on the kernel; returns residual.
    residual: contiguous [..., out_features] of x's leading shape, not overlapping x."""
    _check(x, weight, "weight")
    lib.require(residual.shape == (*x.shape[:-1], weight.shape[0]) and residual.dtype == x.dtype
                and residual.device == x.device and residual.is_contiguous(),
                f"residual must be contiguous {(*x.shape[:-1], weight.shape[0])} {x.dtype} on {x.device}, got "
                f"{tuple(residual.shape)} {residual.dtype} on {residual.device}")
    lib.require(not _overlap(x, residual), "residual must not overlap x")
    flat = x.reshape(-1, x.shape[-1])
    if not _use_kernel(flat, weight):
        if lt_gemm.linear_add_(flat, weight, residual.view(flat.shape[0], weight.shape[0]), scale):
            return residual
        update = F.linear(x, weight)
        return residual.add_(update if scale == 1.0 else update * scale)
    torch.ops.voxcpm.skinny_gemm_residual_(flat, weight, residual.view(flat.shape[0], weight.shape[0]), scale)
    return residual


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    start_a, start_b = a.data_ptr(), b.data_ptr()
    return start_a < start_b + b.numel() * b.element_size() and start_b < start_a + a.numel() * a.element_size()
