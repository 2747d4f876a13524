"""Switches a VoxCPMModel between its reference-faithful PyTorch layers and the custom CUDA ops.

`enable_custom_ops(model, True)` (on the model's final device and dtype) fuses each MLP's gate and
up weights into one [2 * inter, hidden] tensor and each attention's q/k/v weights into one, whose
parts the official parameters then view (state_dict keys and values unchanged, no extra memory:
one GEMM instead of two or three), and makes the stacks use add_rmsnorm /
rmsnorm, the swiglu, fsq and cfg_euler_step ops. `compile_layers` puts each decoder layer's
forward under torch.compile (inductor). Environment: VOXCPM_CUSTOM_OPS=0 and VOXCPM_COMPILE=1.
"""

from __future__ import annotations

import os

import torch

from voxcpm_triton.model.flow_matching import FlowMatching
from voxcpm_triton.model.fsq import ScalarQuantization
from voxcpm_triton.model.minicpm import MLP, Attention, DecoderLayer, MiniCPMModel


def custom_ops_requested() -> bool:
    return os.environ.get("VOXCPM_CUSTOM_OPS", "1") != "0"


def compile_requested() -> bool:
    return os.environ.get("VOXCPM_COMPILE", "0") == "1"


def fuse_weights(owner: torch.nn.Module, linears: list[torch.nn.Linear]) -> torch.Tensor:
    """One weight stacking the layers' weights along the output dimension; each layer's weight
    becomes a view of its rows (so state_dict and memory are unchanged). Kept on `owner`, so
    enabling again after disabling reuses it."""
    fused = getattr(owner, "_fused_weight", None)
    if fused is not None and linears[0].weight.data_ptr() == fused.data_ptr():
        return fused
    fused = torch.cat([linear.weight.detach() for linear in linears], dim=0).contiguous()
    start = 0
    for linear in linears:
        rows = linear.weight.shape[0]
        linear.weight.data = fused[start:start + rows]
        start += rows
    owner._fused_weight = fused
    return fused


def enable_custom_ops(model: torch.nn.Module, enabled: bool) -> None:
    """Route the model's norms, residual adds, MLP activation, FSQ and CFG-Euler update through
    the custom ops (enabled) or the plain PyTorch layers. Call after moving the model."""
    for module in model.modules():
        if isinstance(module, MiniCPMModel):
            module.fused_norms = enabled
        elif isinstance(module, MLP):  # disabling keeps the views: they are valid parameters
            module.gate_up_weight = fuse_weights(module, [module.gate_proj, module.up_proj]) if enabled else None
        elif isinstance(module, Attention):
            module.qkv_weight = fuse_weights(module, [module.q_proj, module.k_proj, module.v_proj]) if enabled else None
        elif isinstance(module, (ScalarQuantization, FlowMatching)):
            module.use_op = enabled


def compile_layers(model: torch.nn.Module) -> None:
    """torch.compile each decoder layer's whole-sequence forward (LocEnc, LocDiT, prefill) and the
    MLP + residual/norm tail of its decode (one compiled graph per shape; the runner's CUDA graph
    captures the compiled kernels). Decode attention stays outside: its ops write the KV cache in
    place, which inductor could turn into copies of whole cache layers. Shapes are static, so each
    prefill length compiles anew: a measuring mode, not a serving one."""
    config = torch._dynamo.config
    for name, at_least in (("cache_size_limit", 256), ("recompile_limit", 256),
                           ("accumulated_cache_size_limit", 4096), ("accumulated_recompile_limit", 4096)):
        if hasattr(config, name):  # the names changed across torch versions
            setattr(config, name, max(getattr(config, name), at_least))
    for module in model.modules():
        if isinstance(module, DecoderLayer) and not getattr(module, "compiled", False):
            for name in ("forward", "fused_forward", "_fused_tail"):
                setattr(module, name, torch.compile(getattr(module, name), dynamic=False))
            module.mlp.forward = torch.compile(module.mlp.forward, dynamic=False)
            module.compiled = True
