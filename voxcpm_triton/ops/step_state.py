"""The decode step's per-slot state, read at its start and written at its end: CUDA ops and PyTorch
references.

The engine keeps what each slot's next step starts from in tables of max_slots + 1 rows (the last,
the scratch slot, belongs to padding rows): both LMs' last hidden states, the previous patch, the
guidance value, the position, and a ring of pre-drawn noise. A step gathers its rows, and at its
end scatters the new ones back and assembles the one row per stream the host reads (the patch in
float32, then the stop flag). In PyTorch that is ~20 gathers, casts and scatters, each a kernel of a
few microseconds in the step's graph; the ops are one launch at each end. Pure copies: the outputs
are bit for bit the references'.
"""

from __future__ import annotations

import torch

from voxcpm_triton.ops import library as lib

GatheredState = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def step_gather_ref(index: torch.Tensor, ring: torch.Tensor, lm_hidden: torch.Tensor, residual_hidden: torch.Tensor,
                    prev_patch: torch.Tensor, cfg_value: torch.Tensor, positions: torch.Tensor) -> GatheredState:
    slots, ring_rows = index[0], index[1]
    position = positions[slots].to(torch.int32)
    kernel_index = torch.stack((slots.to(torch.int32), position, position + 1))
    noise = ring[slots, ring_rows].transpose(1, 2).contiguous()
    return noise, lm_hidden[slots], residual_hidden[slots], prev_patch[slots], cfg_value[slots], kernel_index


def step_scatter_ref(index: torch.Tensor, lengths: torch.Tensor, next_lm: torch.Tensor, next_residual: torch.Tensor,
                     patch: torch.Tensor, stop_logits: torch.Tensor, lm_hidden: torch.Tensor,
                     residual_hidden: torch.Tensor, prev_patch: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    slots = index[0]
    lm_hidden[slots] = next_lm
    residual_hidden[slots] = next_residual
    prev_patch[slots] = patch
    positions[slots] = lengths.to(positions.dtype)
    # The scratch slot: padding rows write cache row 0 every step. A slice's zero_, not item
    # assignment, which copies a host scalar and so cannot be captured in a CUDA graph.
    positions[-1:].zero_()
    stop = stop_logits.argmax(dim=-1) == 1
    return torch.cat((patch.flatten(1).float(), stop.float().unsqueeze(1)), dim=1)


@torch.library.custom_op(
    "voxcpm::step_gather", mutates_args=(),
    schema="(Tensor index, Tensor ring, Tensor lm_hidden, Tensor residual_hidden, Tensor prev_patch, "
           "Tensor cfg_value, Tensor positions) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)")
def _step_gather_op(index: torch.Tensor, ring: torch.Tensor, lm_hidden: torch.Tensor, residual_hidden: torch.Tensor,
                    prev_patch: torch.Tensor, cfg_value: torch.Tensor, positions: torch.Tensor) -> GatheredState:
    if not lib.kernel_ready(lm_hidden):
        return step_gather_ref(index, ring, lm_hidden, residual_hidden, prev_patch, cfg_value, positions)
    out = _gathered_like(index, lm_hidden, prev_patch)
    batch = index.shape[1]
    rows, block, feat, patch = ring.shape
    with lib.device_of(lm_hidden):
        error = lib.library().voxcpm_step_gather(
            *map(lib.ptr, (index, ring, lm_hidden, residual_hidden, prev_patch, cfg_value, positions) + out),
            batch, rows - 1, block, lm_hidden.shape[1], patch, feat, lib.dtype_code(lm_hidden),
            lib.stream_of(lm_hidden))
    lib.check(error, "step_gather")
    return out


@_step_gather_op.register_fake
def _(index: torch.Tensor, ring: torch.Tensor, lm_hidden: torch.Tensor, residual_hidden: torch.Tensor,
      prev_patch: torch.Tensor, cfg_value: torch.Tensor, positions: torch.Tensor) -> GatheredState:
    return _gathered_like(index, lm_hidden, prev_patch)


def _gathered_like(index: torch.Tensor, lm_hidden: torch.Tensor, prev_patch: torch.Tensor) -> GatheredState:
    batch = index.shape[1]
    return (prev_patch.new_empty((batch, *prev_patch.shape[1:])), lm_hidden.new_empty((batch, lm_hidden.shape[1])),
            lm_hidden.new_empty((batch, lm_hidden.shape[1])), prev_patch.new_empty((batch, *prev_patch.shape[1:])),
            torch.empty(batch, dtype=torch.float32, device=index.device),
            torch.empty((3, batch), dtype=torch.int32, device=index.device))


@torch.library.custom_op(
    "voxcpm::step_scatter", mutates_args=("lm_hidden", "residual_hidden", "prev_patch", "positions"),
    schema="(Tensor index, Tensor lengths, Tensor next_lm, Tensor next_residual, Tensor patch, Tensor stop_logits, "
           "Tensor(a!) lm_hidden, Tensor(b!) residual_hidden, Tensor(c!) prev_patch, Tensor(d!) positions) -> Tensor")
def _step_scatter_op(index: torch.Tensor, lengths: torch.Tensor, next_lm: torch.Tensor, next_residual: torch.Tensor,
                     patch: torch.Tensor, stop_logits: torch.Tensor, lm_hidden: torch.Tensor,
                     residual_hidden: torch.Tensor, prev_patch: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    if not lib.kernel_ready(lm_hidden):
        return step_scatter_ref(index, lengths, next_lm, next_residual, patch, stop_logits, lm_hidden,
                                residual_hidden, prev_patch, positions)
    batch, patch_size, feat = patch.shape
    out = torch.empty((batch, patch_size * feat + 1), dtype=torch.float32, device=patch.device)
    with lib.device_of(lm_hidden):
        error = lib.library().voxcpm_step_scatter(
            *map(lib.ptr, (index, lengths, next_lm, next_residual, patch, stop_logits, lm_hidden, residual_hidden,
                           prev_patch, positions, out)),
            batch, lm_hidden.shape[0] - 1, lm_hidden.shape[1], patch_size, feat, lib.dtype_code(lm_hidden),
            lib.stream_of(lm_hidden))
    lib.check(error, "step_scatter")
    return out


@_step_scatter_op.register_fake
def _(index: torch.Tensor, lengths: torch.Tensor, next_lm: torch.Tensor, next_residual: torch.Tensor,
      patch: torch.Tensor, stop_logits: torch.Tensor, lm_hidden: torch.Tensor, residual_hidden: torch.Tensor,
      prev_patch: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    return torch.empty((patch.shape[0], patch[0].numel() + 1), dtype=torch.float32, device=patch.device)


def _require_tensor(name: str, t: torch.Tensor, shape: tuple[int, ...], dtype: torch.dtype,
                    device: torch.device) -> None:
    lib.require(t.shape == shape and t.dtype == dtype and t.device == device and t.is_contiguous(),
                f"{name} must be contiguous {shape} {dtype} on {device}, got {tuple(t.shape)} {t.dtype} on {t.device}")


def _check_tables(lm_hidden: torch.Tensor, residual_hidden: torch.Tensor, prev_patch: torch.Tensor,
                  positions: torch.Tensor) -> None:
    lib.require(lm_hidden.dim() == 2 and lm_hidden.shape[0] >= 1 and 1 <= lm_hidden.shape[1] <= 65536
                and lm_hidden.dtype in lib.KERNEL_DTYPES and lm_hidden.is_contiguous(),
                f"lm_hidden must be a contiguous [slots + 1, hidden <= 65536] tensor of one of {lib.KERNEL_DTYPES}, "
                f"got {tuple(lm_hidden.shape)} {lm_hidden.dtype}")
    rows, device, dtype = lm_hidden.shape[0], lm_hidden.device, lm_hidden.dtype
    _require_tensor("residual_hidden", residual_hidden, tuple(lm_hidden.shape), dtype, device)
    lib.require(prev_patch.dim() == 3 and prev_patch.shape[0] == rows and prev_patch[0].numel() <= 65536
                and prev_patch.dtype == dtype and prev_patch.device == device and prev_patch.is_contiguous(),
                f"prev_patch must be contiguous [{rows}, patch, feat] {dtype} on {device}, got "
                f"{tuple(prev_patch.shape)} {prev_patch.dtype} on {prev_patch.device}")
    _require_tensor("positions", positions, (rows,), torch.int64, device)


def _check_index(index: torch.Tensor, device: torch.device) -> None:
    lib.require(index.dim() == 2 and index.shape[0] == 2 and index.dtype == torch.int64 and index.device == device
                and index.is_contiguous(),
                f"index must be contiguous int64 [2, batch] on {device}, got {tuple(index.shape)} {index.dtype} "
                f"on {index.device}")


def step_gather(index: torch.Tensor, ring: torch.Tensor, lm_hidden: torch.Tensor, residual_hidden: torch.Tensor,
                prev_patch: torch.Tensor, cfg_value: torch.Tensor, positions: torch.Tensor) -> GatheredState:
    """The step's inputs for batch rows of index [2, B] (each row's slot, then its noise-ring row):
    (noise [B, patch, feat], lm_hidden [B, hidden], residual_hidden [B, hidden], prev_patch [B,
    patch, feat], cfg_value float32 [B], kernel_index int32 [3, B]: slot, position, position + 1).
    ring: [slots + 1, block, feat, patch] draws (noise is each row's draw transposed); the tables
    lm_hidden, residual_hidden [slots + 1, hidden], prev_patch [slots + 1, patch, feat] of one
    dtype, cfg_value float32 and positions int64 [slots + 1]."""
    _check_tables(lm_hidden, residual_hidden, prev_patch, positions)
    rows, device = lm_hidden.shape[0], lm_hidden.device
    _check_index(index, device)
    patch, feat = prev_patch.shape[1:]
    lib.require(ring.dim() == 4 and ring.shape[0] == rows and ring.shape[2:] == (feat, patch)
                and ring.dtype == lm_hidden.dtype and ring.device == device and ring.is_contiguous(),
                f"ring must be contiguous [{rows}, block, {feat}, {patch}] {lm_hidden.dtype} on {device}, got "
                f"{tuple(ring.shape)} {ring.dtype} on {ring.device}")
    _require_tensor("cfg_value", cfg_value, (rows,), torch.float32, device)
    return torch.ops.voxcpm.step_gather(index, ring, lm_hidden, residual_hidden, prev_patch, cfg_value, positions)


def step_scatter(index: torch.Tensor, lengths: torch.Tensor, next_lm: torch.Tensor, next_residual: torch.Tensor,
                 patch: torch.Tensor, stop_logits: torch.Tensor, lm_hidden: torch.Tensor,
                 residual_hidden: torch.Tensor, prev_patch: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """Writes the step's results for batch rows of index [2, B] into the slots' tables (as
    step_gather takes them): next_lm, next_residual [B, hidden], patch [B, patch, feat], positions
    = lengths (int32 [B]; the scratch slot, the last, stays at 0). Returns what the host reads,
    float32 [B, patch * feat + 1]: each patch, then 1 where argmax(stop_logits [B, 2]) is 1, else 0."""
    _check_tables(lm_hidden, residual_hidden, prev_patch, positions)
    device, dtype = lm_hidden.device, lm_hidden.dtype
    _check_index(index, device)
    batch = index.shape[1]
    for name, t, shape in (("next_lm", next_lm, (batch, lm_hidden.shape[1])),
                           ("next_residual", next_residual, (batch, lm_hidden.shape[1])),
                           ("patch", patch, (batch, *prev_patch.shape[1:])), ("stop_logits", stop_logits, (batch, 2))):
        _require_tensor(name, t, shape, dtype, device)
    _require_tensor("lengths", lengths, (batch,), torch.int32, device)
    return torch.ops.voxcpm.step_scatter(index, lengths, next_lm, next_residual, patch, stop_logits, lm_hidden,
                                         residual_hidden, prev_patch, positions)
