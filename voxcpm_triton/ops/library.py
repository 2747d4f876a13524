"""Locates libvoxcpm_kernels.so, loads it once with ctypes and declares its C functions.

Search order: $VOXCPM_KERNELS_LIB (a file path), then build/out/lib/ of the source checkout this
package lives in (where build/build_kernels.sh writes it). Nothing is loaded without a CUDA device or
with VOXCPM_DISABLE_KERNELS=1; every op then runs its PyTorch reference. `library_status()` says
which library was loaded or why none was.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from pathlib import Path

import torch

ABI_VERSION = 11  # must equal VOXCPM_KERNELS_ABI_VERSION in kernels/voxcpm_kernels.h
LIBRARY_NAME = "libvoxcpm_kernels.so"
_DTYPE_CODES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
KERNEL_DTYPES = tuple(_DTYPE_CODES)

_p = ctypes.c_void_p
_i64 = ctypes.c_int64
_i32 = ctypes.c_int
_f32 = ctypes.c_float
_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "voxcpm_abi_version": (_i32, []),
    "voxcpm_error_string": (ctypes.c_char_p, [_i32]),
    "voxcpm_add_rmsnorm": (_i32, [_p, _p, _p, _p, _i64, _i64, _f32, _f32, _i32, _p]),
    "voxcpm_rope_kv_write": (
        _i32,
        [_p, _i64, _i64, _p, _i64, _i64, _p, _i64, _i64, _p, _p, _p, _i64, _p, _p, _p, _p,
         _i64, _i64, _i64, _i64, _i64, _i64, _i32, _i32, _i32, _p, _i64, _f32, _i32, _p],
    ),
    "voxcpm_decode_attention_workspace_bytes": (ctypes.c_size_t, [_i64, _i32, _i32, _i32]),
    "voxcpm_decode_attention": (
        _i32,
        [_p, _p, _p, _i64, _i64, _i64, _i64, _i64, _p, _p, _p, _p, ctypes.c_size_t, _i64, _i32,
         _i32, _i32, _i32, _f32, _i32, _p],
    ),
    "voxcpm_decode_attention_rope": (
        _i32,
        [_p, _i64, _p, _p, _i64, _p, _p, _i64, _p, _p, _i64, _f32, _p, _p, _i64, _i64, _i64, _i64, _i64, _p, _p, _p,
         _p, ctypes.c_size_t, _i64, _i32, _i32, _i32, _i32, _f32, _i32, _p],
    ),
    "voxcpm_short_attention": (_i32, [_p, _p, _p, _i64, _p, _p, _i64, _f32, _p, _i64, _i32, _i32, _i32, _i32, _f32,
                                      _i32, _i32, _p]),
    "voxcpm_swiglu": (_i32, [_p, _p, _i64, _f32, _p, _i64, _i64, _i32, _p]),
    "voxcpm_cfg_euler": (_i32, [_p, _p, _p, _p, _p, _i64, _i64, _i32, _p]),
    "voxcpm_fsq": (_i32, [_p, _p, _i64, _f32, _i32, _p]),
    "voxcpm_skinny_gemm_workspace_bytes": (ctypes.c_size_t, [_i64, _i64, _i64, _i32]),
    "voxcpm_skinny_gemm_counters": (_i64, [_i64]),
    "voxcpm_skinny_gemm": (
        _i32, [_p, _p, _p, _p, _f32, _p, _f32, _p, ctypes.c_size_t, _p, _i64, _i64, _i64, _i32, _i32, _p],
    ),
    "voxcpm_snake": (_i32, [_p, _i64, _i64, _p, _p, _i64, _i64, _i64, _i32, _p]),
    "voxcpm_snake_depthwise_conv": (_i32, [_p, _i64, _i64, _p, _p, _p, _p, _p, _i64, _i64, _i64, _i32, _i32, _p]),
    "voxcpm_quantize_fp8": (_i32, [_p, _p, _p, _i64, _i64, _i32, _i32, _p]),
    "voxcpm_gate_up_swiglu_sm90": (_i32, [_p, _p, _p, _p, _i64, _i64, _i64, _i32, _i32, _p]),
    "voxcpm_row_scale": (_i32, [_p, _p, _i64, _i64, _f32, _i32, _p]),
    "voxcpm_locdit_sequence": (_i32, [_p, _p, _p, _p, _p, _i64, _i64, _i64, _i64, _i64, _i32, _p]),
    "voxcpm_step_gather": (_i32, [_p] * 13 + [_i64] * 6 + [_i32, _p]),
    "voxcpm_step_scatter": (_i32, [_p] * 11 + [_i64] * 5 + [_i32, _p]),
}
EXPORTED_SYMBOLS = tuple(_SIGNATURES)


class KernelError(RuntimeError):
    """A CUDA op of the kernels library reported an error."""


def candidate_paths() -> list[Path]:
    """Where the library is looked for, in order."""
    paths = []
    if os.environ.get("VOXCPM_KERNELS_LIB"):
        paths.append(Path(os.environ["VOXCPM_KERNELS_LIB"]))
    paths.append(Path(__file__).resolve().parents[2] / "build" / "out" / "lib" / LIBRARY_NAME)
    return paths


def _declare(lib: ctypes.CDLL) -> None:
    for name, (restype, argtypes) in _SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


@functools.cache
def _load() -> tuple[ctypes.CDLL | None, str]:
    if os.environ.get("VOXCPM_DISABLE_KERNELS") == "1":
        return None, "disabled by VOXCPM_DISABLE_KERNELS=1"
    if not torch.cuda.is_available():
        return None, "no CUDA device"
    tried = []
    for path in candidate_paths():
        if not path.is_file():
            tried.append(f"{path} (missing)")
            continue
        lib = ctypes.CDLL(str(path))
        version = lib.voxcpm_abi_version()
        if version != ABI_VERSION:
            raise KernelError(f"{path} has C ABI version {version}, this package needs {ABI_VERSION}: rebuild it "
                              "with build/build_kernels.sh")
        _declare(lib)
        return lib, f"loaded {path}"
    return None, "not found: " + ", ".join(tried)


def library() -> ctypes.CDLL | None:
    """The loaded library, or None when the reference path is in use."""
    return _load()[0]


def library_status() -> str:
    return _load()[1]


@torch.compiler.assume_constant_result
def kernels_loaded() -> bool:
    # A constant to torch.compile, so wrappers that ask it trace without looking into ctypes.
    return library() is not None


def kernel_ready(t: torch.Tensor) -> bool:
    """True when `t` lives on a CUDA device, holds elements and the library is loaded, so the CUDA
    op runs. An empty tensor takes the reference: its data pointer may be null, which the C entry
    points refuse."""
    return t.is_cuda and t.dtype in _DTYPE_CODES and t.numel() > 0 and kernels_loaded()


def dtype_code(t: torch.Tensor) -> int:
    return _DTYPE_CODES[t.dtype]


def ptr(t: torch.Tensor | None) -> int | None:
    return None if t is None else t.data_ptr()


def stream_of(t: torch.Tensor) -> int:
    return torch.cuda.current_stream(t.device).cuda_stream


def device_of(t: torch.Tensor) -> contextlib.AbstractContextManager:
    """Makes t's device current for the launch (the library launches on the current device)."""
    if t.device.index is None or t.device.index == torch.cuda.current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(t.device)


def check(error: int, op: str) -> None:
    if error != 0:
        lib = library()
        text = lib.voxcpm_error_string(error).decode() if lib is not None else str(error)
        raise KernelError(f"{op}: CUDA error {error}: {text}")


def require(condition: bool, message: str) -> None:
    """Argument validation at the op boundary: ValueError naming the tensor and the allowed range."""
    if not condition:
        raise ValueError(message)
