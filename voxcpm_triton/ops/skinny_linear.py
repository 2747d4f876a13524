"""Linear layers over a few activation rows: the skinny_gemm CUDA op and its reference.

At one or a few streams every GEMM of a decoder step has 1 to 32 activation rows (LM decode: one
per stream; LocDiT: 2 x 11 tokens per stream with both CFG branches), so each costs streaming its
weight once; kernels/skinny_gemm.cu does that closer to memory bandwidth than cuBLAS's choices for
these shapes and can fold SwiGLU into the gate_up projection. `linear` and `gate_up_swiglu` pick
the kernel when the shape allows and fall back to F.linear (+ swiglu) otherwise, so callers need
no shape logic. VOXCPM_SKINNY_GEMM=0 turns the kernel off and VOXCPM_SKINNY_PLAIN_ROWS=N (1..32)
moves the plain-GEMM row limit (A/B measurements).
"""

from __future__ import annotations

import functools
import os

import torch
import torch.nn.functional as F

from voxcpm_triton.ops import library as lib
from voxcpm_triton.ops.swiglu import swiglu, swiglu_ref

MAX_ROWS = 32
# `linear` routes plain GEMMs to the kernel up to this many rows. Alone, one GEMM at the LocDiT's 22
# rows is slower on it than on cuBLAS (7.6 against 5.1 us for 1024 -> 2560; perf/RESULTS.md run 6).
# In the whole step it is faster, most likely because it joins the chain of programmatic dependent
# launches that cuBLAS's kernels break: 1 / 4 / 16 streams 6.56 / 7.51 / 9.15 -> 6.31 / 7.20 /
# 8.72 ms with 32 instead of 8 (run 16, two interleaved repeats).
PLAIN_MAX_ROWS = int(os.environ.get("VOXCPM_SKINNY_PLAIN_ROWS", "32"))
if not 1 <= PLAIN_MAX_ROWS <= MAX_ROWS:
    raise ValueError(f"VOXCPM_SKINNY_PLAIN_ROWS={PLAIN_MAX_ROWS}; allowed: 1..{MAX_ROWS}")
PLAIN, SWIGLU = 0, 1
# Counters are one int32 per 32 weight rows; 4096 covers weights of up to 131072 rows.
COUNTERS = 4096
_KERNEL_DTYPES = (torch.bfloat16, torch.float16)
_counters: dict[torch.device, torch.Tensor] = {}


def skinny_gemm_ref(x: torch.Tensor, weight: torch.Tensor, epilogue: int) -> torch.Tensor:
    out = F.linear(x, weight)
    return swiglu_ref(out) if epilogue == SWIGLU else out


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


@torch.library.custom_op("voxcpm::skinny_gemm", mutates_args=(),
                         schema="(Tensor x, Tensor weight, int epilogue) -> Tensor")
def _skinny_gemm_op(x: torch.Tensor, weight: torch.Tensor, epilogue: int) -> torch.Tensor:
    if not lib.kernel_ready(x):
        return skinny_gemm_ref(x, weight, epilogue)
    m, k = x.shape
    n = weight.shape[0]
    kernels = lib.library()
    out = x.new_empty((m, n // 2 if epilogue == SWIGLU else n))
    with lib.device_of(x):
        nbytes = kernels.voxcpm_skinny_gemm_workspace_bytes(m, n, k, epilogue)
        workspace = torch.empty(max(nbytes, 1), dtype=torch.uint8, device=x.device)
        error = kernels.voxcpm_skinny_gemm(lib.ptr(x), lib.ptr(weight), lib.ptr(out), lib.ptr(workspace), nbytes,
                                           lib.ptr(_counter_buffer(x.device)), m, n, k, epilogue, lib.dtype_code(x),
                                           lib.stream_of(x))
    lib.check(error, "skinny_gemm")
    return out


@_skinny_gemm_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, epilogue: int) -> torch.Tensor:
    n = weight.shape[0]
    return x.new_empty((x.shape[0], n // 2 if epilogue == SWIGLU else n))


def _check(x: torch.Tensor, weight: torch.Tensor, name: str) -> None:
    lib.require(x.dim() >= 1 and weight.dim() == 2 and x.shape[-1] == weight.shape[1],
                f"{name} must be [out_features, {x.shape[-1] if x.dim() else '?'}] for x of shape {tuple(x.shape)}, "
                f"got {tuple(weight.shape)}")


def skinny_gemm(x: torch.Tensor, weight: torch.Tensor, epilogue: int = PLAIN) -> torch.Tensor:
    """The op itself: x [m <= 32, k] contiguous bf16/fp16 on a compute capability >= 8 GPU, k and
    weight's rows multiples of 32. Prefer `linear` / `gate_up_swiglu`, which fall back on shapes the
    kernel does not take."""
    _check(x, weight, "weight")
    lib.require(epilogue in (PLAIN, SWIGLU), f"epilogue must be {PLAIN} (plain) or {SWIGLU} (SwiGLU), got {epilogue}")
    lib.require(x.dim() == 2 and 1 <= x.shape[0] <= MAX_ROWS,
                f"x must be [rows, k] with 1 <= rows <= {MAX_ROWS}, got {tuple(x.shape)}")
    if lib.kernel_ready(x):
        lib.require(_kernel_takes(x, weight),
                    f"skinny_gemm on the GPU needs contiguous, 16-byte aligned {_KERNEL_DTYPES} tensors of one "
                    f"dtype, k and out_features multiples of 32 and compute capability >= 8; got x "
                    f"{tuple(x.shape)} {x.dtype}, weight {tuple(weight.shape)} {weight.dtype}")
    return torch.ops.voxcpm.skinny_gemm(x, weight, epilogue)


def linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """F.linear(x, weight) without bias, through the skinny_gemm kernel for up to PLAIN_MAX_ROWS
    rows when it takes the shape."""
    _check(x, weight, "weight")
    flat = x.reshape(-1, x.shape[-1])
    if flat.shape[0] > PLAIN_MAX_ROWS or not _use_kernel(flat, weight):
        return F.linear(x, weight)
    return torch.ops.voxcpm.skinny_gemm(flat, weight, PLAIN).view(*x.shape[:-1], weight.shape[0])


def gate_up_swiglu(x: torch.Tensor, gate_up_weight: torch.Tensor) -> torch.Tensor:
    """swiglu(F.linear(x, gate_up_weight)) for a fused [gate; up] weight, in one kernel when the
    skinny_gemm kernel takes the shape."""
    _check(x, gate_up_weight, "gate_up_weight")
    lib.require(gate_up_weight.shape[0] % 2 == 0,
                f"gate_up_weight must have an even number of rows, got {gate_up_weight.shape[0]}")
    flat = x.reshape(-1, x.shape[-1])
    if not _use_kernel(flat, gate_up_weight):
        return swiglu(F.linear(x, gate_up_weight))
    out = torch.ops.voxcpm.skinny_gemm(flat, gate_up_weight, SWIGLU)
    return out.view(*x.shape[:-1], gate_up_weight.shape[0] // 2)
