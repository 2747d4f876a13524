"""Switches a VoxCPMModel between its reference-faithful PyTorch layers and the custom CUDA ops.

`enable_custom_ops(model, True)` (on the model's final device and dtype) fuses each MLP's gate and
up weights into one [2 * inter, hidden] tensor and each attention's q/k/v weights into one, whose
parts the official parameters then view (state_dict keys and values unchanged, no extra memory:
one GEMM instead of two or three), and makes the stacks use add_rmsnorm /
rmsnorm, the swiglu, fsq and cfg_euler_step ops; a stack call of at most 32 rows (one or a few
streams) takes each norm and residual add into its skinny_gemm GEMMs instead (MiniCPMModel), and
biased layers (Projection) go through ops.linear. `compile_layers` puts each decoder layer's
forward under torch.compile (inductor). `enable_fp8` gives the LocDiT's GEMMs FP8 copies of their
weights for large batches (opt-in precision mode). `enable_sm90_gate_up` gives the LocDiT's MLPs
the interleaved gate_up copy of the Hopper GEMM with SwiGLU in its epilogue. `enable_folded_norms`
gives the LocDiT's layers copies of their qkv and gate_up weights with the RMSNorm weights folded
in, so that many-row stack calls write no normed rows. `enable_folded_statistics` gives the paths
where the kernel after a GEMM computes the norm's row statistic their folded weights (the LMs'
layers past skinny_gemm's rows, LocEnc's and the LocDiT's mid-sized sequences). Environment:
VOXCPM_CUSTOM_OPS=0, VOXCPM_COMPILE=1, VOXCPM_FP8=1 (VOXCPM_FP8_MIN_ROWS, default 1024),
VOXCPM_SM90_GATE_UP=0, VOXCPM_FOLDED_NORMS=0, and VOXCPM_FOLDED_DECODE=0 / VOXCPM_FOLDED_ENCODER=0 /
VOXCPM_FOLDED_DIT=0 (enable_folded_statistics' three paths).
"""

from __future__ import annotations

import os

import torch

from voxcpm_triton.model.attention import Attention
from voxcpm_triton.model.flow_matching import FlowMatching
from voxcpm_triton.model.fsq import ScalarQuantization
from voxcpm_triton.model.local_dit import LocalDiT
from voxcpm_triton.model.minicpm import DecoderLayer, MiniCPMModel
from voxcpm_triton.model.mlp import MLP
from voxcpm_triton.model.projection import Projection
from voxcpm_triton.ops import gate_up_sm90
from voxcpm_triton.ops.fp8_linear import Fp8Weight, quantizable, quantize_weight

# Activation rows from which the LocDiT's GEMMs take FP8: below this they stream their weights more
# than they compute (skinny_gemm or bf16 cuBLAS serve them); the LocDiT has ~22 rows per stream.
# Measured on the H200 (perf/RESULTS.md run 9): at 352 LocDiT rows (16 streams) the FP8 step was
# slower than bf16 (12.7 against 8.9 ms), at 1408 (64 streams) faster (15.2 against 16.1 ms).
FP8_MIN_ROWS = 1024


def custom_ops_requested() -> bool:
    return os.environ.get("VOXCPM_CUSTOM_OPS", "1") != "0"


def compile_requested() -> bool:
    return os.environ.get("VOXCPM_COMPILE", "0") == "1"


def fp8_requested() -> bool:
    return os.environ.get("VOXCPM_FP8", "0") == "1"


def fp8_min_rows() -> int:
    value = os.environ.get("VOXCPM_FP8_MIN_ROWS", str(FP8_MIN_ROWS))
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"VOXCPM_FP8_MIN_ROWS must be an integer >= 1, got {value!r}")
    return int(value)


def folded_norms_requested() -> bool:
    return os.environ.get("VOXCPM_FOLDED_NORMS", "1") != "0"


def folded_decode_requested() -> bool:
    return os.environ.get("VOXCPM_FOLDED_DECODE", "1") != "0"


def folded_encoder_requested() -> bool:
    return os.environ.get("VOXCPM_FOLDED_ENCODER", "1") != "0"


def folded_dit_requested() -> bool:
    return os.environ.get("VOXCPM_FOLDED_DIT", "1") != "0"


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
    """Route the model's norms, residual adds, MLP activation, FSQ, CFG-Euler update and biased
    projections through the custom ops (enabled) or the plain PyTorch layers. Call after moving
    the model."""
    for module in model.modules():
        if isinstance(module, MiniCPMModel):
            module.fused_norms = enabled
        elif isinstance(module, MLP):  # disabling keeps the views: they are valid parameters
            module.gate_up_weight = fuse_weights(module, [module.gate_proj, module.up_proj]) if enabled else None
        elif isinstance(module, Attention):
            module.qkv_weight = fuse_weights(module, [module.q_proj, module.k_proj, module.v_proj]) if enabled else None
        elif isinstance(module, (ScalarQuantization, FlowMatching, Projection)):
            module.use_op = enabled


def _fp8_copy(linears: list[torch.nn.Linear], min_rows: int) -> Fp8Weight | None:
    """FP8 copy of the linears' weights stacked along the output dimension (as fuse_weights
    stacks them), or None where the GEMM's shape does not fit the FP8 kernel."""
    weight = torch.cat([linear.weight.detach() for linear in linears])
    return quantize_weight(weight, min_rows) if quantizable(weight) else None


def enable_fp8(model: torch.nn.Module, enabled: bool, min_rows: int = FP8_MIN_ROWS) -> int:
    """Give (enabled) or take away the FP8 weight copies of every LocDiT layer's qkv, gate_up and
    down_proj GEMMs (o_proj stays bf16: see Attention.fp8_qkv); returns the bytes the copies hold.
    With them, a GEMM whose activation has >= min_rows rows runs on FP8 tensor cores (compute
    capability >= 8.9, bf16 activations; the reference on the CPU), the rest stay as they were. Only the custom-ops path
    (enable_custom_ops) routes through them. Call on the model's final device."""
    held = 0
    for dit in (module for module in model.modules() if isinstance(module, LocalDiT)):
        for module in dit.decoder.modules():
            if isinstance(module, Attention):
                groups = {"fp8_qkv": [module.q_proj, module.k_proj, module.v_proj]}
            elif isinstance(module, MLP):
                groups = {"fp8_gate_up": [module.gate_proj, module.up_proj], "fp8_down": [module.down_proj]}
            else:
                continue
            for name, linears in groups.items():
                copy = _fp8_copy(linears, min_rows) if enabled else None
                setattr(module, name, copy)
                held += 0 if copy is None else copy.codes.nbytes + copy.scale.nbytes
    return held


def enable_sm90_gate_up(model: torch.nn.Module, enabled: bool) -> int:
    """Give (enabled) or take away each LocDiT MLP's interleaved gate_up copy, with which its
    gate_up GEMM and SwiGLU may run as one Hopper kernel at many rows (ops.gate_up_sm90; only
    where that kernel runs on the weight's device, and VOXCPM_SM90_GATE_UP=0 keeps it off);
    returns the bytes the copies hold. Call after enable_custom_ops, on the final device."""
    held = 0
    for dit in (module for module in model.modules() if isinstance(module, LocalDiT)):
        for mlp in (module for module in dit.decoder.modules() if isinstance(module, MLP)):
            weight = mlp.gate_up_weight
            take = enabled and weight is not None and gate_up_sm90.available(weight)
            mlp.gate_up_interleaved = gate_up_sm90.interleave(weight) if take else None
            held += weight.nbytes if take else 0
    return held


def _fold(weight: torch.Tensor, norm_weight: torch.Tensor) -> torch.Tensor:
    """weight [n, k] times the norm's weight [k] along k, rounded once."""
    return (weight.float() * norm_weight.float()).to(weight.dtype)


def _sync_folded_qkv(layer: DecoderLayer) -> int:
    """A layer's folded qkv weight exists while either folded path holds its gate_up copy (the
    interleaved one of enable_folded_norms, the plain one of enable_folded_statistics): both paths
    read the same one. Returns its bytes while it exists."""
    attention, mlp = layer.self_attn, layer.mlp
    if mlp.folded_gate_up is None and mlp.folded_plain_gate_up is None:
        attention.folded_qkv = None
        return 0
    if attention.folded_qkv is None:
        attention.folded_qkv = _fold(attention.qkv_weight, layer.input_layernorm.weight)
    return attention.folded_qkv.nbytes


def enable_folded_norms(model: torch.nn.Module, enabled: bool, need_kernel: bool = True) -> int:
    """Give (enabled) or take away each LocDiT layer's folded weights: its fused qkv weight times
    the input norm's weight, and its interleaved gate_up weight times the post-attention norm's.
    rmsnorm(x) * w @ W^T is (x @ (W diag(w))^T) * rsqrt(mean(x^2) + eps) per row, so with them a
    stack call of >= minicpm.FOLDED_NORMS_MIN_ROWS rows reads the residual stream in its qkv and
    gate_up GEMMs, the norms shrink to a [rows] statistic that short_attention and the gate_up
    epilogue apply (short_attention computes its own up to minicpm.ATTENTION_STATISTIC_MAX_ROWS
    rows), and the residual adds move into o_proj's and down's GEMMs: the step 3.0-3.3% faster at
    64-512 streams (perf/RESULTS.md run 62). Only where the Hopper gate_up kernel
    runs, which has the row scale in its epilogue (need_kernel=False: anywhere, for the CPU tests,
    where every op runs its reference). Returns the bytes the copies hold. Call after
    enable_custom_ops, on the final device."""
    held = 0
    for dit in (module for module in model.modules() if isinstance(module, LocalDiT)):
        for layer in dit.decoder.layers:
            attention, mlp = layer.self_attn, layer.mlp
            take = (enabled and attention.qkv_weight is not None and mlp.gate_up_weight is not None
                    and (not need_kernel or gate_up_sm90.available(mlp.gate_up_weight)))
            post_norm = layer.post_attention_layernorm.weight
            mlp.folded_gate_up = gate_up_sm90.interleave(_fold(mlp.gate_up_weight, post_norm)) if take else None
            qkv_bytes = _sync_folded_qkv(layer)
            held += qkv_bytes + mlp.folded_gate_up.nbytes if take else 0
    return held


def folded_copy_bytes(model: torch.nn.Module) -> int:
    """The bytes the folded weight copies of enable_folded_norms and enable_folded_statistics hold
    now, a LocDiT layer's shared qkv copy counted once (their own returns each count it)."""
    held = 0
    for layer in (module for module in model.modules() if isinstance(module, DecoderLayer)):
        for copy in (layer.self_attn.folded_qkv, layer.mlp.folded_gate_up, layer.mlp.folded_plain_gate_up):
            held += copy.nbytes if copy is not None else 0
    return held


def enable_folded_statistics(model: torch.nn.Module, lms: bool, encoder: bool, dit: bool = False) -> int:
    """Give or take away the folded weights of the paths where the kernel after a GEMM computes the
    norm's row statistic itself: the fused qkv weight times the input norm's weight, and the fused
    gate_up weight (not interleaved) times the post-attention norm's. `lms`: the LMs' layers, for a
    decode step of more rows than skinny_gemm takes (33+ streams; rope_kv_write and swiglu compute
    the statistics). `encoder` and `dit`: LocEnc's and the LocDiT's layers, for whole sequences of
    33 to minicpm.ATTENTION_STATISTIC_MAX_ROWS rows where enable_folded_norms' path does not run
    (short_attention and swiglu compute them; the LocDiT's layers share their folded qkv weight with
    that path). Either way the residual adds move into o_proj's and down's GEMMs and neither
    add_rmsnorm kernel of a layer runs. Returns the bytes the copies hold (VoxCPM2: ~2.2 GB for the
    LMs, ~0.25 GB each for LocEnc and the LocDiT). Call after enable_custom_ops, on the final
    device."""
    stacks = [(getattr(model, "base_lm", None), lms), (getattr(model, "residual_lm", None), lms)]
    stacks += [(getattr(getattr(model, "feat_encoder", None), "encoder", None), encoder)]
    stacks += [(module.decoder, dit) for module in model.modules() if isinstance(module, LocalDiT)]
    held = 0
    for stack, enabled in stacks:
        for layer in stack.layers if isinstance(stack, MiniCPMModel) else ():
            attention, mlp = layer.self_attn, layer.mlp
            take = enabled and attention.qkv_weight is not None and mlp.gate_up_weight is not None
            mlp.folded_plain_gate_up = (_fold(mlp.gate_up_weight, layer.post_attention_layernorm.weight)
                                        if take else None)
            qkv_bytes = _sync_folded_qkv(layer)
            held += qkv_bytes + mlp.folded_plain_gate_up.nbytes if take else 0
    return held


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
