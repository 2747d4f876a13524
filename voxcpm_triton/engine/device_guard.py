"""The engine's CUDA device made current around its device work, whichever thread does it.

PyTorch runs an op on its tensors' device, but a few calls act on the thread's *current* device
when none is named, and every new thread starts on device 0: an event's record(), a CUDA graph's
replay() (it launches on the current device's stream), torch.cuda.synchronize(), and the stream
torch.cuda.graph captures on by default (created once per process, on the device current at the
first capture). An engine on cuda:1 stepped by a thread that never made cuda:1 current (Triton's
ar_decoder instance on the second GPU, `VoxCPM.from_pretrained(devices=[0, 1])`) would capture empty
graphs and wait on an event of the wrong device before reading its step's output.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import ContextManager, TypeVar

import torch

R = TypeVar("R")


def current(device: torch.device) -> ContextManager:
    """`device` as the current CUDA device inside the block (nothing to do for the CPU)."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def on_own_device(method: Callable[..., R]) -> Callable[..., R]:
    """Runs the method with its object's `device` current."""
    @functools.wraps(method)
    def guarded(self, *args, **kwargs) -> R:
        with current(self.device):
            return method(self, *args, **kwargs)
    return guarded
