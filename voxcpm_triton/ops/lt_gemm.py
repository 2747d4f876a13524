"""GEMMs of many rows on cuBLASLt, each shape on the algorithm that timed fastest for it.

From 64 streams up the LocDiT's GEMMs (1408+ rows) are compute-bound, and torch runs them on
cuBLAS's heuristic choice: 720 TFLOP/s for gate_up but ~470 for o_proj and down, whose 1024 output
columns make too few tiles for 132 multiprocessors (perf/RESULTS.md run 18). cuBLASLt's heuristic
lists several algorithms per shape, and lt_search finds faster configurations near them. `tuning()`
(entered by the graph caches while they warm a graph up) lets `linear` time each candidate once per
shape, F.linear among them, and keep the fastest;
outside it `linear` runs what was chosen, or F.linear for a shape never timed. So a captured graph
only ever holds a choice made before the capture. `linear_add_` does the same for a GEMM whose
output is added to a tensor in place (beta = 1: a residual add inside the GEMM's epilogue).

cuBLASLt is reached through ctypes on the copy torch has loaded: its C API is stable, and this
way the kernels library needs no cuBLAS headers to build. All choices on a device share one
workspace, so they must not run on two streams at once; the engine runs one step at a time.
VOXCPM_LT_GEMM=0 turns the path off (A/B measurements).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import torch
import torch.nn.functional as F

from voxcpm_triton.ops import lt_cache, lt_search

WORKSPACE_BYTES = 32 << 20  # what torch gives cuBLAS on Hopper
CANDIDATES = 16  # heuristic results asked for per shape
MIN_ROWS = 64  # below this the LM's weight-bound GEMMs gain nothing from a different tile
# A cuBLASLt choice replaces F.linear only when it times at least this much faster: timing noise
# must not swap equal kernels back and forth between runs.
MIN_GAIN = 0.02
TIMED_CALLS = 20
# ~2.5 ms at the H200's clock: longer than the host needs to queue TIMED_CALLS calls.
HOLD_CYCLES = 5_000_000
ALIGNMENT = 256  # bytes; torch's allocator starts every block on 512
Choice = TypeVar("Choice")

# cuBLAS / cuBLASLt enum values used here (cublasLt.h, cublas_api.h, library_types.h).
_COMPUTE_32F = 68
_R_32F, _R_16F, _R_16BF = 0, 2, 14
_OP_N, _OP_T = 0, 1
_DESC_TRANSA, _DESC_TRANSB, _DESC_EPILOGUE, _DESC_BIAS_POINTER = 3, 4, 7, 8
_EPILOGUE_DEFAULT, _EPILOGUE_BIAS = 1, 4
_PREF_MAX_WORKSPACE_BYTES = 1
_DATA_TYPES = {torch.bfloat16: _R_16BF, torch.float16: _R_16F}


class _Algo(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class _Heuristic(ctypes.Structure):
    _fields_ = [("algo", _Algo), ("workspace_size", ctypes.c_size_t), ("state", ctypes.c_int),
                ("waves_count", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


class LtError(RuntimeError):
    """cuBLASLt returned a status other than success."""


def enabled() -> bool:
    return os.environ.get("VOXCPM_LT_GEMM", "1") != "0"


@functools.cache
def _library() -> ctypes.CDLL:
    """torch's cuBLASLt (already in the process once torch has run a GEMM on the GPU)."""
    names = ["libcublasLt.so.13", "libcublasLt.so.12"]
    nvidia = Path(torch.__file__).resolve().parents[1] / "nvidia"
    names += [str(path) for path in sorted(nvidia.glob("*/lib/libcublasLt.so*"))]
    for name in names:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        _declare(lib)
        return lib
    raise LtError(f"cuBLASLt not found (tried {', '.join(names)})")


def _declare(lib: ctypes.CDLL) -> None:
    p, u64, i64, i32 = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int64, ctypes.c_int
    signatures = {
        "cublasLtCreate": [p],
        "cublasLtMatmulDescCreate": [p, i32, i32],
        "cublasLtMatmulDescSetAttribute": [p, i32, p, ctypes.c_size_t],
        "cublasLtMatrixLayoutCreate": [p, i32, u64, u64, i64],
        "cublasLtMatmulPreferenceCreate": [p],
        "cublasLtMatmulPreferenceSetAttribute": [p, i32, p, ctypes.c_size_t],
        "cublasLtMatmulAlgoGetHeuristic": [p, p, p, p, p, p, p, i32, p, p],
        "cublasLtMatmul": [p, p, p, p, p, p, p, p, p, p, p, p, p, p, ctypes.c_size_t, p],
        # Building algorithms by hand (lt_search).
        "cublasLtMatmulAlgoInit": [p, i32, i32, i32, i32, i32, i32, i32, p],
        "cublasLtMatmulAlgoCapGetAttribute": [p, i32, p, ctypes.c_size_t, p],
        "cublasLtMatmulAlgoConfigSetAttribute": [p, i32, p, ctypes.c_size_t],
        "cublasLtMatmulAlgoConfigGetAttribute": [p, i32, p, ctypes.c_size_t, p],
        "cublasLtMatmulAlgoCheck": [p, p, p, p, p, p, p, p],
    }
    for name, argtypes in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
    lib.cublasLtGetVersion.argtypes = []
    lib.cublasLtGetVersion.restype = ctypes.c_size_t


def version() -> int:
    """cuBLASLt's version number (e.g. 130100): its configurations are only comparable within one."""
    return int(_library().cublasLtGetVersion())


def _call(name: str, *args: object) -> None:
    status = getattr(_library(), name)(*args)
    if status != 0:
        raise LtError(f"{name} returned cuBLAS status {status}")


@dataclass
class _Plan:
    """Descriptors of one shape: y [m, n] = x [m, k] @ w [n, k]^T (+ bias [n]), in cuBLASLt's
    column-major terms y^T = w^T' x^T with w read transposed."""
    desc: ctypes.c_void_p
    w_layout: ctypes.c_void_p
    x_layout: ctypes.c_void_p
    y_layout: ctypes.c_void_p
    algo: _Algo | None = None  # None: F.linear timed fastest


class _Device:
    """The handle and workspace of one GPU."""

    def __init__(self, device: torch.device):
        self.handle = ctypes.c_void_p()
        _call("cublasLtCreate", ctypes.byref(self.handle))
        self.workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)


_devices: dict[int, _Device] = {}
_plans: dict[tuple, _Plan] = {}
_tuning = threading.local()


@contextlib.contextmanager
def tuning() -> Iterator[None]:
    """Let `linear` time the candidates of shapes it has not seen (eager calls only, on the GPU)."""
    previous = getattr(_tuning, "on", False)
    _tuning.on = True
    try:
        yield
    finally:
        _tuning.on = previous


def is_tuning() -> bool:
    """Whether a tuning() block is open on this thread (gate_up_sm90 times its shapes there too)."""
    return getattr(_tuning, "on", False)


def _device(device: torch.device) -> _Device:
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in _devices:
        _devices[index] = _Device(torch.device("cuda", index))
    return _devices[index]


def _key(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> tuple:
    return (x.device.index, x.shape[0], weight.shape[0], x.shape[1], x.dtype, bias is not None)


def _add_key(x: torch.Tensor, weight: torch.Tensor) -> tuple:
    """linear_add_'s plan key: its choices (beta = 1) are timed apart from linear's."""
    return (*_key(x, weight, None), "add")


def takes(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> bool:
    """Whether `linear` may put x [m, k] @ weight^T on cuBLASLt at all. The heuristic is asked
    once per shape and assumes fully aligned operands, so views at an offset stay on F.linear."""
    operands = (x, weight) if bias is None else (x, weight, bias)
    return (x.is_cuda and enabled() and x.dim() == 2 and x.shape[0] >= MIN_ROWS and x.dtype in _DATA_TYPES
            and weight.dim() == 2 and weight.shape[1] == x.shape[1]
            and (bias is None or bias.shape == (weight.shape[0],))
            and all(t.dtype == x.dtype and t.device == x.device and t.is_contiguous() and t.data_ptr() % ALIGNMENT == 0
                    for t in operands)
            and not torch.compiler.is_compiling())


def linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """F.linear(x, weight, bias) for x [m, k], on the cuBLASLt algorithm chosen for this shape."""
    if not takes(x, weight, bias):
        return F.linear(x, weight, bias)
    plan = _chosen(_key(x, weight, bias), lambda: _tune(x, weight, bias))
    if plan is None:
        return F.linear(x, weight, bias)
    out = x.new_empty((x.shape[0], weight.shape[0]))
    _run(plan, plan.algo, x, weight, bias, out)
    return out


def _chosen(key: tuple, tune: Callable[[], _Plan]) -> _Plan | None:
    """The shape's plan if it holds a chosen algorithm, timing the shape first (tune) when a
    tuning() block is open outside a capture; None: the caller runs its own fallback."""
    plan = _plans.get(key)
    if plan is None:
        if not is_tuning() or torch.cuda.is_current_stream_capturing():
            return None
        plan = _plans[key] = tune()
    return plan if plan.algo is not None else None


def choice(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> str:
    """What `linear` runs for this shape: "cuBLASLt", "F.linear" (timed faster, or not taken) or
    "untimed" (F.linear until a tuning() call sees the shape)."""
    if not takes(x, weight, bias):
        return "F.linear"
    plan = _plans.get(_key(x, weight, bias))
    return "untimed" if plan is None else "F.linear" if plan.algo is None else "cuBLASLt"


def _make_plan(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> _Plan:
    (m, k), n, dtype = x.shape, weight.shape[0], _DATA_TYPES[x.dtype]
    desc = ctypes.c_void_p()
    _call("cublasLtMatmulDescCreate", ctypes.byref(desc), _COMPUTE_32F, _R_32F)
    for attr, value in ((_DESC_TRANSA, _OP_T), (_DESC_TRANSB, _OP_N),
                        (_DESC_EPILOGUE, _EPILOGUE_BIAS if bias is not None else _EPILOGUE_DEFAULT)):
        word = ctypes.c_int32(value)
        _call("cublasLtMatmulDescSetAttribute", desc, attr, ctypes.byref(word), ctypes.sizeof(word))
    layouts = []
    for rows, cols in ((k, n), (k, m), (n, m)):
        layout = ctypes.c_void_p()
        _call("cublasLtMatrixLayoutCreate", ctypes.byref(layout), dtype, rows, cols, rows)
        layouts.append(layout)
    return _Plan(desc, *layouts)


def candidates(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> tuple[_Plan, list[_Algo]]:
    """The shape's descriptors and the algorithms cuBLASLt's heuristic offers for it, best first."""
    device = _device(x.device)
    plan = _make_plan(x, weight, bias)
    preference = ctypes.c_void_p()
    _call("cublasLtMatmulPreferenceCreate", ctypes.byref(preference))
    limit = ctypes.c_uint64(WORKSPACE_BYTES)
    _call("cublasLtMatmulPreferenceSetAttribute", preference, _PREF_MAX_WORKSPACE_BYTES, ctypes.byref(limit),
          ctypes.sizeof(limit))
    results = (_Heuristic * CANDIDATES)()
    count = ctypes.c_int(0)
    _call("cublasLtMatmulAlgoGetHeuristic", device.handle, plan.desc, plan.w_layout, plan.x_layout, plan.y_layout,
          plan.y_layout, preference, CANDIDATES, results, ctypes.byref(count))
    return plan, [results[i].algo for i in range(count.value) if results[i].state == 0]


def _run(plan: _Plan, algo: _Algo, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
         out: torch.Tensor, alpha_value: float = 1.0, beta_value: float = 0.0) -> None:
    device = _device(x.device)
    if bias is not None:
        pointer = ctypes.c_void_p(bias.data_ptr())
        _call("cublasLtMatmulDescSetAttribute", plan.desc, _DESC_BIAS_POINTER, ctypes.byref(pointer),
              ctypes.sizeof(pointer))
    alpha, beta = ctypes.c_float(alpha_value), ctypes.c_float(beta_value)
    _call("cublasLtMatmul", device.handle, plan.desc, ctypes.byref(alpha), weight.data_ptr(), plan.w_layout,
          x.data_ptr(), plan.x_layout, ctypes.byref(beta), out.data_ptr(), plan.y_layout, out.data_ptr(),
          plan.y_layout, ctypes.byref(algo), device.workspace.data_ptr(), WORKSPACE_BYTES,
          torch.cuda.current_stream(x.device).cuda_stream)


def run_algo(plan: _Plan, algo: _Algo, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
             out: torch.Tensor | None = None) -> torch.Tensor:
    """One candidate's output, in `out` when given (tests and perf/lt_gemm_sweep.py compare every
    candidate; tuning times them)."""
    out = x.new_empty((x.shape[0], weight.shape[0])) if out is None else out
    _run(plan, algo, x, weight, bias, out)
    return out


def time_call(fn: Callable[[], object], calls: int = TIMED_CALLS) -> float:
    """Device ms per fn() over `calls` back-to-back calls on the current stream. The calls are
    queued behind a sleeping kernel, so the time is the GPU's alone: at a few us per GEMM the
    host's launch cost (~15 us through ctypes or torch's dispatcher) would otherwise be timed,
    and it is absent when a CUDA graph replays the same calls."""
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(HOLD_CYCLES)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls


def fastest(expected: torch.Tensor, baseline: Callable[[], object],
            candidates: Iterable[tuple[Choice, Callable[[], torch.Tensor]]],
            errors: tuple[type[Exception], ...] = ()) -> Choice | None:
    """The choice of the fastest candidate call that reproduces `expected` (the baseline's output)
    and times at least MIN_GAIN faster than `baseline`; None when no candidate does. A candidate
    whose call raises one of `errors` is left out. Shared by the GEMM paths that pick an
    implementation per shape while a graph warms up."""
    scale = expected.float().abs().max().item() + 1e-6
    timed = []
    for choice, call in candidates:
        try:
            out = call()
        except errors:
            continue
        if (out.float() - expected.float()).abs().max().item() > 2e-2 * scale:
            continue  # a candidate that does not compute the same product is never chosen
        timed.append((time_call(call), len(timed), choice))
    if not timed:
        return None
    best_ms, _, choice = min(timed)
    return choice if best_ms < time_call(baseline) * (1 - MIN_GAIN) else None


def _searched(plan: _Plan, algos: list[_Algo], runner: Callable[[_Algo], Callable[[], object]],
              like: torch.Tensor, key: tuple) -> list[_Algo]:
    """The heuristic's algorithms and the fastest configurations lt_search finds from them, or an
    earlier walk found (lt_cache) with at least the walk time this one would have."""
    wanted = lt_search.requested_s(like.shape[0])
    if wanted <= 0 or not algos:
        return algos
    entry = lt_cache.lookup(like.device, key)
    cached = [algo for algo in (lt_search.build(config, like.dtype, like.device) for config in entry.configs)
              if algo is not None and lt_search.check(plan, algo, like.device)] if entry else []
    found = cached
    if not cached or entry.seconds < wanted:
        seconds = lt_search.budget_s(like.shape[0])
        if seconds > 0:
            found = lt_search.walk(plan, algos + cached, runner, like.dtype, like.device, seconds)
            lt_cache.record(like.device, key, lt_cache.Entry(seconds, tuple(map(lt_search.decode, found))))
    seen = {bytes(algo) for algo in algos}
    return algos + [algo for algo in found if bytes(algo) not in seen]


def _tune(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> _Plan:
    """Times F.linear and every candidate that reproduces it; the plan keeps the fastest."""
    plan, algos = candidates(x, weight, bias)
    out = x.new_empty((x.shape[0], weight.shape[0]))

    def call(algo: _Algo) -> Callable[[], torch.Tensor]:
        return functools.partial(run_algo, plan, algo, x, weight, bias, out)

    algos = _searched(plan, algos, call, x, _key(x, weight, bias))
    calls = [(algo, call(algo)) for algo in algos]
    plan.algo = fastest(F.linear(x, weight, bias), lambda: F.linear(x, weight, bias), calls, errors=(LtError,))
    return plan


def linear_add_(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, scale: float) -> bool:
    """out += scale * x @ weight^T in place as one cuBLASLt GEMM (C = D = out, rounded once), for x
    [m, k] and out [m, n] contiguous. Returns False, having done nothing, where no algorithm was
    chosen for the shape (not taken, never timed, or the two-kernel F.linear + add timed faster):
    the caller then adds its own way."""
    if not (takes(x, weight, None) and out.shape == (x.shape[0], weight.shape[0]) and out.dtype == x.dtype
            and out.is_contiguous() and out.data_ptr() % ALIGNMENT == 0):
        return False
    plan = _chosen(_add_key(x, weight), lambda: _tune_add(x, weight, out, scale))
    if plan is None:
        return False
    _run(plan, plan.algo, x, weight, None, out, scale, 1.0)
    return True


def _tune_add(x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor, scale: float) -> _Plan:
    """Times F.linear + add_ against every candidate that reproduces it with out as the source."""
    plan, algos = candidates(x, weight, None)
    expected = (out.float() + scale * F.linear(x, weight).float()).to(out.dtype)
    scratch = out.clone()
    algos = _searched(plan, algos, lambda algo: functools.partial(_accumulate, plan, algo, x, weight, scratch, scale),
                      x, _add_key(x, weight))

    def accumulating() -> Iterable[tuple[_Algo, Callable[[], torch.Tensor]]]:
        for algo in algos:  # one scratch copy at a time: its first call must start from out
            scratch = out.clone()
            yield algo, functools.partial(_accumulate, plan, algo, x, weight, scratch, scale)

    baseline = out.clone()
    plan.algo = fastest(expected, lambda: baseline.add_(F.linear(x, weight), alpha=scale), accumulating(),
                        errors=(LtError,))
    return plan


def _accumulate(plan: _Plan, algo: _Algo, x: torch.Tensor, weight: torch.Tensor, out: torch.Tensor,
                scale: float) -> torch.Tensor:
    _run(plan, algo, x, weight, None, out, scale, 1.0)
    return out
