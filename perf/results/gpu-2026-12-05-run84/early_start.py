"""Run 84's probe: a captured cuBLASLt GEMM as a programmatic dependent of the kernel before it.

`allow(stream)`: during stream capture, turn the edge the next captured node will get from the
stream's last node into a programmatic one (CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC from the kernel's
trigger port), so that node's blocks may start once the kernel before it triggers its dependents.
That is only safe for a kernel that waits (griddepcontrol.wait) before it reads what the kernel
before it wrote. `honours(run, x)` measures whether it does: it captures late_copy (which triggers at
once and writes its output only after a delay) and run(copy) behind it on such an edge.
"""

from __future__ import annotations

import ctypes
import os
from collections import Counter
from pathlib import Path
from typing import Callable

import torch

_HERE = Path(__file__).resolve().parent
_CAPTURE_ACTIVE = 1
_NODE_KERNEL = 0
_SET_DEPENDENCIES = 1
_PORT_PROGRAMMATIC = 1
_TYPE_PROGRAMMATIC = 1
outcomes: Counter = Counter()


class EdgeData(ctypes.Structure):
    _fields_ = [("from_port", ctypes.c_ubyte), ("to_port", ctypes.c_ubyte), ("type", ctypes.c_ubyte),
                ("reserved", ctypes.c_ubyte * 5)]


_cu = ctypes.CDLL("libcuda.so.1")
_p = ctypes.c_void_p
_cu.cuStreamGetCaptureInfo_v3.argtypes = [_p, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_uint64),
                                          ctypes.POINTER(_p), ctypes.POINTER(ctypes.POINTER(_p)),
                                          ctypes.POINTER(ctypes.POINTER(EdgeData)), ctypes.POINTER(ctypes.c_size_t)]
_cu.cuStreamUpdateCaptureDependencies_v2.argtypes = [_p, ctypes.POINTER(_p), ctypes.POINTER(EdgeData),
                                                     ctypes.c_size_t, ctypes.c_uint]
_cu.cuGraphNodeGetType.argtypes = [_p, ctypes.POINTER(ctypes.c_int)]
_cu.cuModuleLoadData.argtypes = [ctypes.POINTER(_p), ctypes.c_char_p]
_cu.cuModuleGetFunction.argtypes = [ctypes.POINTER(_p), _p, ctypes.c_char_p]
_cu.cuLaunchKernel.argtypes = [_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                               ctypes.c_uint, ctypes.c_uint, _p, ctypes.POINTER(_p), ctypes.POINTER(_p)]


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what}: CUDA driver error {status}")


def allow(stream: int) -> str:
    """Makes the next node captured on `stream` a programmatic dependent of its one kernel
    predecessor; returns what happened (counted in `outcomes`)."""
    status, ident, graph = ctypes.c_int(), ctypes.c_uint64(), _p()
    deps, data, count = ctypes.POINTER(_p)(), ctypes.POINTER(EdgeData)(), ctypes.c_size_t()
    _check(_cu.cuStreamGetCaptureInfo_v3(stream, ctypes.byref(status), ctypes.byref(ident), ctypes.byref(graph),
                                         ctypes.byref(deps), ctypes.byref(data), ctypes.byref(count)),
           "cuStreamGetCaptureInfo_v3")
    if status.value != _CAPTURE_ACTIVE:
        outcome = "not capturing"
    elif count.value != 1:
        outcome = f"{count.value} predecessors"
    else:
        kind = ctypes.c_int()
        _check(_cu.cuGraphNodeGetType(deps[0], ctypes.byref(kind)), "cuGraphNodeGetType")
        if kind.value != _NODE_KERNEL:
            outcome = f"predecessor node type {kind.value}"
        elif data and data[0].type != 0:
            outcome = "already programmatic"
        else:
            node = (_p * 1)(deps[0])
            edge = (EdgeData * 1)()
            edge[0].from_port, edge[0].type = _PORT_PROGRAMMATIC, _TYPE_PROGRAMMATIC
            _check(_cu.cuStreamUpdateCaptureDependencies_v2(stream, node, edge, 1, _SET_DEPENDENCIES),
                   "cuStreamUpdateCaptureDependencies_v2")
            outcome = "allowed"
    outcomes[outcome] += 1
    return outcome


_function = None


def _late_copy_function() -> _p:
    global _function
    if _function is None:
        module, function = _p(), _p()
        _check(_cu.cuModuleLoadData(ctypes.byref(module), (_HERE / "late_copy.cubin").read_bytes()), "cuModuleLoadData")
        _check(_cu.cuModuleGetFunction(ctypes.byref(function), module, b"late_copy"), "cuModuleGetFunction")
        _function = function
    return _function


def late_copy(dst: torch.Tensor, src: torch.Tensor, delay_ns: int) -> None:
    assert src.is_contiguous() and dst.is_contiguous() and src.nbytes == dst.nbytes and src.nbytes % 16 == 0
    args = [_p(src.data_ptr()), _p(dst.data_ptr()), ctypes.c_longlong(src.nbytes // 16), ctypes.c_ulonglong(delay_ns)]
    params = (_p * len(args))(*[ctypes.cast(ctypes.pointer(a), _p) for a in args])
    stream = torch.cuda.current_stream(src.device).cuda_stream
    _check(_cu.cuLaunchKernel(_late_copy_function(), 4, 1, 1, 256, 1, 1, 0, stream, params, None), "cuLaunchKernel")


def honours(run: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, delay_ns: int = 100_000) -> bool:
    """Whether run(x') sees x' as late_copy left it when captured as late_copy's programmatic
    dependent (run must launch one kernel first, which reads x'; its output must depend on x)."""
    expected = run(x).clone()
    probe = torch.zeros_like(x)
    graph, side = torch.cuda.CUDAGraph(), torch.cuda.Stream(x.device)
    side.wait_stream(torch.cuda.current_stream(x.device))
    with torch.cuda.graph(graph, stream=side, capture_error_mode="thread_local"):
        late_copy(probe, x, delay_ns)
        allow(side.cuda_stream)
        got = run(probe)
    probe.zero_()
    graph.replay()
    torch.cuda.synchronize(x.device)
    scale = expected.float().abs().max().item() + 1e-6
    return (got.float() - expected.float()).abs().max().item() <= 1e-3 * scale


def enabled() -> bool:
    return os.environ.get("VOXCPM_PROBE_EARLY", "0") == "1"
