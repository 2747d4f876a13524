"""L2 prefetch of the weights a few-row decoder layer is about to stream: CUDA op and reference.

The op changes no value anywhere (it is a cache hint), so its reference, the CPU path, does nothing;
what it buys is time, measured by perf/profile_step.py with VOXCPM_PREFETCH_ROWS=0 against the
default (perf/RESULTS.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from voxcpm_triton.ops import library as lib

MAX_TENSORS = 4


def prefetch_l2_ref(tensors: Sequence[torch.Tensor], max_bytes: int) -> None:
    """Nothing to compute: a prefetch has no result."""


def byte_ranges(tensors: Sequence[torch.Tensor], max_bytes: int) -> list[tuple[int, int]]:
    """(address, bytes) of each tensor in order, the total cut off at max_bytes."""
    ranges, left = [], max_bytes
    for tensor in tensors:
        take = min(tensor.numel() * tensor.element_size(), left)
        if take > 0:
            ranges.append((tensor.data_ptr(), take))
        left -= take
    return ranges


@torch.library.custom_op("voxcpm::prefetch_l2", mutates_args=(), schema="(Tensor[] tensors, int max_bytes) -> ()")
def _prefetch_l2_op(tensors: list[torch.Tensor], max_bytes: int) -> None:
    if not lib.kernel_ready(tensors[0]):
        return prefetch_l2_ref(tensors, max_bytes)
    ranges = byte_ranges(tensors, max_bytes)
    ranges += [(None, 0)] * (MAX_TENSORS - len(ranges))
    args = [value for pair in ranges for value in pair]
    with lib.device_of(tensors[0]):
        error = lib.library().voxcpm_prefetch_l2(*args, lib.stream_of(tensors[0]))
    lib.check(error, "prefetch_l2")


@_prefetch_l2_op.register_fake
def _(tensors: list[torch.Tensor], max_bytes: int) -> None:
    return None


def prefetch_l2(tensors: Sequence[torch.Tensor], max_bytes: int) -> None:
    """Ask for the first max_bytes of the tensors' bytes, in order, to be brought into L2.

    Up to MAX_TENSORS contiguous tensors on one device, each 16-byte aligned (weights always are).
    """
    lib.require(1 <= len(tensors) <= MAX_TENSORS, f"prefetch_l2 takes 1..{MAX_TENSORS} tensors, got {len(tensors)}")
    lib.require(max_bytes >= 0, f"max_bytes must be >= 0, got {max_bytes}")
    for index, tensor in enumerate(tensors):
        lib.require(tensor.is_contiguous(), f"tensor {index} must be contiguous, got strides {tensor.stride()}")
        lib.require(tensor.device == tensors[0].device,
                    f"tensor {index} is on {tensor.device}, tensor 0 on {tensors[0].device}")
        lib.require(tensor.data_ptr() % 16 == 0 or tensor.numel() == 0,
                    f"tensor {index} must be 16-byte aligned (address {tensor.data_ptr():#x})")
    torch.ops.voxcpm.prefetch_l2(list(tensors), int(max_bytes))
