"""The MLP's gate_up GEMM with SwiGLU in its epilogue, for many rows on Hopper (CUTLASS kernel).

At 64+ streams the LocDiT's gate_up GEMM writes [rows, 2 * inter] bf16 that the swiglu op then
reads back (~8% of the 64-stream step, perf/RESULTS.md run 29). kernels/gate_up_swiglu_sm90.cu
applies SwiGLU to the accumulators before they leave the multiprocessor, so only [rows, inter] is
written. It reads the fused [gate; up] weight interleaved by blocks of INTERLEAVE rows
(`interleave`): a copy made once per layer by fast_path.enable_sm90_gate_up.

Like lt_gemm, each shape runs what timed fastest: inside `lt_gemm.tuning()` the first call of a
shape times both CUTLASS schedules against cuBLAS + swiglu and keeps a schedule only when it is at
least lt_gemm.MIN_GAIN faster and matches that path's output; outside it a shape never timed takes
cuBLAS + swiglu. VOXCPM_SM90_GATE_UP=0 turns the path off (A/B measurements).
"""

from __future__ import annotations

import functools
import os

import torch
import torch.nn.functional as F

from voxcpm_triton.ops import library as lib
from voxcpm_triton.ops import lt_gemm
from voxcpm_triton.ops.row_scale import check_row_scale
from voxcpm_triton.ops.swiglu import swiglu, swiglu_ref

INTERLEAVE = 64  # == VOXCPM_GATE_UP_INTERLEAVE in kernels/voxcpm_kernels.h
# == VOXCPM_GATE_UP_* in the header: tile rows x columns, 2 x 1 clusters unless no_cluster. On the
# H200 the clusters win from ~2800 rows (128 streams), the plain grid below (perf/RESULTS.md run 34).
SCHEDULES = {"pingpong_64x256": 0, "pingpong_64x256_no_cluster": 1}
WEIGHT_ROWS = 4 * INTERLEAVE  # the widest tile: two (gate block, up block) pairs
# Below this many rows the GEMM streams its weight more than it computes; skinny_gemm and cuBLAS
# serve those, and a copy of the weight would not pay for its memory.
MIN_ROWS = 512
_NOT_SUPPORTED = 801  # cudaErrorNotSupported

_plans: dict[tuple, int | None] = {}  # shape -> schedule, or None where cuBLAS + swiglu timed faster


def requested() -> bool:
    return os.environ.get("VOXCPM_SM90_GATE_UP", "1") != "0"


def interleave(gate_up_weight: torch.Tensor) -> torch.Tensor:
    """The fused [gate; up] weight [2 * inter, k] with its rows in blocks of INTERLEAVE: gate block
    0, up block 0, gate block 1, ... (a new tensor)."""
    rows, k = gate_up_weight.shape
    inter = rows // 2
    lib.require(rows % 2 == 0 and inter % INTERLEAVE == 0,
                f"gate_up weight rows must be 2 * a multiple of {INTERLEAVE}, got {rows}")
    blocks = gate_up_weight.view(2, inter // INTERLEAVE, INTERLEAVE, k)
    return blocks.transpose(0, 1).reshape(rows, k).contiguous()


def deinterleave(interleaved: torch.Tensor) -> torch.Tensor:
    """interleave's inverse: the [gate; up] weight."""
    rows, k = interleaved.shape
    blocks = interleaved.view(rows // (2 * INTERLEAVE), 2, INTERLEAVE, k)
    return blocks.transpose(0, 1).reshape(rows, k).contiguous()


def gate_up_swiglu_ref(x: torch.Tensor, interleaved: torch.Tensor,
                       row_scale: torch.Tensor | None = None) -> torch.Tensor:
    """swiglu(x @ [gate; up]^T) from the interleaved weight, in PyTorch; with row_scale [rows], the
    product's row r times row_scale[r] before its rounding."""
    if row_scale is None:
        return swiglu_ref(F.linear(x, deinterleave(interleaved)))
    product = F.linear(x.float(), deinterleave(interleaved).float()) * row_scale.unsqueeze(1)
    return swiglu_ref(product.to(x.dtype))


def _supported_here(device: torch.device) -> bool:
    if lib.library() is None:
        return False
    return _probe(device.index if device.index is not None else torch.cuda.current_device())


@functools.cache
def _probe(device_index: int) -> bool:
    """Whether the kernel runs on this device: a call with no rows launches nothing and reports
    cudaErrorNotSupported off sm_90 or in a library built without CUTLASS."""
    with torch.cuda.device(device_index):
        buffer = torch.empty(8, dtype=torch.bfloat16, device="cuda")
        error = lib.library().voxcpm_gate_up_swiglu_sm90(buffer.data_ptr(), buffer.data_ptr(), None, buffer.data_ptr(),
                                                         0, 8, WEIGHT_ROWS // 2, 0, lib.dtype_code(buffer), None)
    if error not in (0, _NOT_SUPPORTED):
        lib.check(error, "gate_up_swiglu_sm90 probe")
    return error == 0


def available(weight: torch.Tensor) -> bool:
    """Whether a [gate; up] weight like this one can use the kernel on its device."""
    rows = weight.shape[0] if weight.dim() == 2 else 0
    return (requested() and weight.is_cuda and weight.dtype == torch.bfloat16 and weight.dim() == 2
            and rows % WEIGHT_ROWS == 0 and weight.shape[1] % 8 == 0 and _supported_here(weight.device))


@torch.library.custom_op("voxcpm::gate_up_swiglu_sm90", mutates_args=(),
                         schema="(Tensor x, Tensor weight, int schedule, Tensor? row_scale) -> Tensor")
def _gate_up_swiglu_op(x: torch.Tensor, weight: torch.Tensor, schedule: int,
                       row_scale: torch.Tensor | None) -> torch.Tensor:
    if not lib.kernel_ready(x):
        return gate_up_swiglu_ref(x, weight, row_scale)
    inter = weight.shape[0] // 2
    out = x.new_empty((x.shape[0], inter))
    with lib.device_of(x):
        error = lib.library().voxcpm_gate_up_swiglu_sm90(lib.ptr(x), lib.ptr(weight), lib.ptr(row_scale), lib.ptr(out),
                                                         x.shape[0], x.shape[1], inter, schedule, lib.dtype_code(x),
                                                         lib.stream_of(x))
    lib.check(error, "gate_up_swiglu_sm90")
    return out


@_gate_up_swiglu_op.register_fake
def _(x: torch.Tensor, weight: torch.Tensor, schedule: int, row_scale: torch.Tensor | None) -> torch.Tensor:
    return x.new_empty((x.shape[0], weight.shape[0] // 2))


def fused(x: torch.Tensor, interleaved: torch.Tensor, schedule: int = 0,
          row_scale: torch.Tensor | None = None) -> torch.Tensor:
    """swiglu(x @ [gate; up]^T) for x [rows, k] on the CUTLASS kernel (the reference off the GPU);
    row_scale (float32 [rows]) multiplies each row's product before SwiGLU (a folded RMSNorm)."""
    lib.require(x.dim() == 2 and interleaved.dim() == 2 and x.shape[1] == interleaved.shape[1],
                f"x [rows, k] and weight [2 * inter, k] expected, got {tuple(x.shape)} and {tuple(interleaved.shape)}")
    lib.require(x.dtype == interleaved.dtype == torch.bfloat16, f"bf16 operands expected, got {x.dtype}")
    lib.require(interleaved.shape[0] % WEIGHT_ROWS == 0 and x.shape[1] % 8 == 0,
                f"weight rows must be a multiple of {WEIGHT_ROWS} and k of 8, got {tuple(interleaved.shape)}")
    lib.require(x.is_contiguous() and interleaved.is_contiguous(), "x and weight must be contiguous")
    lib.require(interleaved.device == x.device, f"weight must be on x's device {x.device}, got {interleaved.device}")
    lib.require(schedule in SCHEDULES.values(), f"schedule must be one of {SCHEDULES}, got {schedule}")
    if row_scale is not None:
        check_row_scale(row_scale, x.shape[0], x.device)
    return torch.ops.voxcpm.gate_up_swiglu_sm90(x, interleaved, schedule, row_scale)


def _unfused(x: torch.Tensor, gate_up_weight: torch.Tensor) -> torch.Tensor:
    return swiglu(lt_gemm.linear(x, gate_up_weight))


def takes(x: torch.Tensor, interleaved: torch.Tensor | None) -> bool:
    return (interleaved is not None and requested() and x.dim() == 2 and x.shape[0] >= MIN_ROWS and x.is_cuda
            and x.dtype == torch.bfloat16 and x.is_contiguous() and x.data_ptr() % 16 == 0
            and not torch.compiler.is_compiling())


def _key(x: torch.Tensor, gate_up_weight: torch.Tensor) -> tuple:
    return (x.device.index, x.shape[0], x.shape[1], gate_up_weight.shape[0])


def gate_up_swiglu(x: torch.Tensor, gate_up_weight: torch.Tensor, interleaved: torch.Tensor | None) -> torch.Tensor:
    """swiglu(x @ gate_up_weight^T) for x [rows, k]: on the CUTLASS kernel where its timing chose
    it for this shape (interleaved: `interleave(gate_up_weight)`), else cuBLAS(Lt) + swiglu."""
    if interleaved is not None:  # the kernel reads it whole, with TMA: nothing else is checked there
        lib.require(interleaved.shape == gate_up_weight.shape and interleaved.dtype == gate_up_weight.dtype
                    and interleaved.device == gate_up_weight.device and interleaved.is_contiguous(),
                    f"interleaved must be a contiguous copy of gate_up_weight's shape {tuple(gate_up_weight.shape)}, "
                    f"dtype and device, got {tuple(interleaved.shape)} {interleaved.dtype} on {interleaved.device}")
    if not takes(x, interleaved):
        return _unfused(x, gate_up_weight)
    key = _key(x, gate_up_weight)
    if key not in _plans:
        if not lt_gemm.is_tuning() or torch.cuda.is_current_stream_capturing():
            return _unfused(x, gate_up_weight)
        _plans[key] = _tune(x, gate_up_weight, interleaved)
    schedule = _plans[key]
    if schedule is None:
        return _unfused(x, gate_up_weight)
    return torch.ops.voxcpm.gate_up_swiglu_sm90(x, interleaved, schedule, None)


def choice(x: torch.Tensor, gate_up_weight: torch.Tensor, interleaved: torch.Tensor | None) -> str:
    """What gate_up_swiglu runs for this shape: a schedule's name, "unfused", or "untimed"."""
    if not takes(x, interleaved):
        return "unfused"
    schedule = _plans.get(_key(x, gate_up_weight), "untimed")
    names = {value: name for name, value in SCHEDULES.items()}
    return "unfused" if schedule is None else names.get(schedule, "untimed")


def _tune(x: torch.Tensor, gate_up_weight: torch.Tensor, interleaved: torch.Tensor) -> int | None:
    """Times cuBLAS + swiglu and each schedule that reproduces it; returns the fastest schedule, or
    None when none beats the unfused path by lt_gemm.MIN_GAIN."""
    expected = _unfused(x, gate_up_weight)  # also lets lt_gemm choose for the GEMM's own shape
    schedules = [(schedule, functools.partial(torch.ops.voxcpm.gate_up_swiglu_sm90, x, interleaved, schedule, None))
                 for schedule in SCHEDULES.values()]
    return lt_gemm.fastest(expected, lambda: _unfused(x, gate_up_weight), schedules)


_scaled_schedules: dict[tuple, int] = {}


def scaled(x: torch.Tensor, interleaved: torch.Tensor, row_scale: torch.Tensor) -> torch.Tensor:
    """swiglu((x @ [gate; up]^T) * row_scale) for a layer whose post-attention RMSNorm weight is
    folded into the interleaved weight (fast_path.enable_folded_norms). Only the CUTLASS kernel
    applies a row scale in its epilogue, so there is no cuBLAS path: callers check `available`
    first. The schedule is the faster of the two for the shape, timed inside lt_gemm.tuning(); an
    untimed shape takes the cluster schedule."""
    key = (x.device.index, x.shape[0], x.shape[1], interleaved.shape[0])
    schedule = _scaled_schedules.get(key)
    if schedule is None:
        if not lt_gemm.is_tuning() or not x.is_cuda or torch.cuda.is_current_stream_capturing():
            return fused(x, interleaved, SCHEDULES["pingpong_64x256"], row_scale)
        times = {value: lt_gemm.time_call(functools.partial(fused, x, interleaved, value, row_scale))
                 for value in SCHEDULES.values()}
        schedule = _scaled_schedules[key] = min(times, key=times.get)
    return fused(x, interleaved, schedule, row_scale)
