"""MiniCPM-4 transformer stack: the base LM, the residual LM and the backbones of LocEnc and LocDiT.

Two entry points per stack: `forward` runs whole sequences (prefill, LocEnc, LocDiT), `decode`
advances a batch of streams by one token against a per-slot KV cache, each stream at its own
position. A layer is attention.py's Attention and mlp.py's MLP, each behind an RMSNorm
(rms_norm.py); rope.py builds the rotary tables. Numerics follow the reference: RMSNorm statistics
and RoPE rotation in float32, then back to the weights' dtype.
"""

from __future__ import annotations

import os

import torch
import torch.nn as nn

from voxcpm_triton import ops
from voxcpm_triton.config import LMConfig
from voxcpm_triton.model.attention import Attention, DecodeSlots, RopeOp, RopeTables, SequenceRope, ShortAttentionOp
from voxcpm_triton.model.mlp import MLP
from voxcpm_triton.model.rms_norm import RMSNorm
from voxcpm_triton.model.rope import LongRoPE
from voxcpm_triton.ops.short_attention import KERNEL_HEAD_DIMS as SHORT_ATTENTION_HEAD_DIMS
from voxcpm_triton.ops.short_attention import MAX_SEQ_LEN as SHORT_ATTENTION_MAX_LEN

# Rows (sequences x tokens) from which a stack with folded norm weights (fast_path.enable_folded_norms)
# runs them: measured from 1408 rows (64 LocDiT streams) up, perf/RESULTS.md run 62.
FOLDED_NORMS_MIN_ROWS = 1024


def _attention_statistic_max_rows() -> int:
    value = os.environ.get("VOXCPM_ATTENTION_STATISTIC_MAX_ROWS", "2048")
    if not value.isdigit():
        raise ValueError(f"VOXCPM_ATTENTION_STATISTIC_MAX_ROWS must be an integer >= 0, got {value!r}")
    return int(value)


# Rows up to which a folded layer's short_attention computes the input norm's statistic itself from
# the rows the qkv GEMM read, so that no row_scale kernel runs in front of that GEMM. On the H200
# the step was 2.1% faster at 1408 rows (64 LocDiT streams) and 0.3% / 2.2% slower at 2816 / 5632
# (the 128 and 256 buckets), where the blocks' extra reads no longer hide behind the GEMM's tail
# (perf/RESULTS.md run 81). The environment variable overrides it for A/B timing.
ATTENTION_STATISTIC_MAX_ROWS = _attention_statistic_max_rows()


class DecoderLayer(nn.Module):
    def __init__(self, config: LMConfig):
        super().__init__()
        self.self_attn = Attention(config)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.residual_scale = config.residual_scale

    def _add(self, residual: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
        if self.residual_scale == 1.0:
            return residual + update
        return residual + update * self.residual_scale

    def forward(self, x: torch.Tensor, rope: SequenceRope, causal: bool,
                rows: slice | None = None) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """`rows`: the positions whose output is wanted (non-causal only; see MiniCPMModel.forward)."""
        attn, k, v = self.self_attn(self.input_layernorm(x), rope, causal, rows)
        x = self._add(x if rows is None else x[:, rows], attn)
        x = self._add(x, self.mlp(self.post_attention_layernorm(x)))
        return x, k, v

    def decode(self, x: torch.Tensor, rope: RopeTables | None, k_cache: torch.Tensor, v_cache: torch.Tensor,
               where: DecodeSlots) -> torch.Tensor:
        x = self._add(x, self.self_attn.decode(self.input_layernorm(x), rope, k_cache, v_cache, where))
        return self._add(x, self.mlp(self.post_attention_layernorm(x)))

    def _fused_tail(self, x: torch.Tensor, attn: torch.Tensor, next_norm: RMSNorm) -> torch.Tensor:
        """Residual adds folded into add_rmsnorm (x updated in place); returns next_norm(x)."""
        eps = self.post_attention_layernorm.eps
        h = ops.add_rmsnorm(x, attn, self.post_attention_layernorm.weight, eps, self.residual_scale)
        return ops.add_rmsnorm(x, self.mlp(h), next_norm.weight, next_norm.eps, self.residual_scale)

    def fused_forward(self, x: torch.Tensor, h: torch.Tensor, rope: SequenceRope,
                      causal: bool, next_norm: RMSNorm, rows: slice | None = None
                      ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """forward() on the custom ops: h = input_layernorm(x) from the previous layer; x (the
        residual stream) is updated in place, or a copy of its `rows` when given; returns
        (next_norm(x), k, v)."""
        attn, k, v = self.self_attn(h, rope, causal, rows)
        return self._fused_tail(x if rows is None else x[:, rows].contiguous(), attn, next_norm), k, v

    def fused_decode(self, x: torch.Tensor, h: torch.Tensor, rope: RopeTables | None, k_cache: torch.Tensor,
                     v_cache: torch.Tensor, where: DecodeSlots, next_norm: RMSNorm) -> torch.Tensor:
        return self._fused_tail(x, self.self_attn.decode(h, rope, k_cache, v_cache, where), next_norm)

    def normed_forward(self, x: torch.Tensor, tables: ShortAttentionOp, rows: slice | None = None) -> torch.Tensor:
        """forward() of a few rows on the custom ops with both norms inside the GEMMs that read
        them: x is the raw residual stream, updated in place (or a copy of its `rows`); returned."""
        residual = x if rows is None else x[:, rows].contiguous()
        self.self_attn.normed_short_attention(x, self.input_layernorm, tables, residual, self.residual_scale, rows)
        return self.mlp.add_normed_(residual, self.post_attention_layernorm, self.residual_scale)

    def folded_forward(self, x: torch.Tensor, tables: ShortAttentionOp, rows: slice | None = None) -> torch.Tensor:
        """normed_forward for many rows with both norm weights folded into the qkv and gate_up weights
        (fast_path.enable_folded_norms): no normed rows are written, only each norm's [rows] float32
        statistic, which the consumers of the two GEMMs apply; up to ATTENTION_STATISTIC_MAX_ROWS rows
        short_attention computes the input norm's itself."""
        residual = x if rows is None else x[:, rows].contiguous()
        eps = self.input_layernorm.eps
        row_scale = None if x.shape[0] * x.shape[1] <= ATTENTION_STATISTIC_MAX_ROWS else ops.row_scale(x, eps)
        self.self_attn.folded_short_attention(x, eps, row_scale, tables, residual, self.residual_scale, rows)
        return self.mlp.add_folded_(residual, self.post_attention_layernorm, self.residual_scale)

    def folded_plain_forward(self, x: torch.Tensor, tables: ShortAttentionOp,
                             rows: slice | None = None) -> torch.Tensor:
        """folded_forward for fewer rows, without the Hopper gate_up kernel: the gate_up GEMM is
        cuBLAS's and swiglu computes the post-attention norm's statistic, short_attention the input
        norm's (fast_path.enable_folded_statistics gives the weights)."""
        residual = x if rows is None else x[:, rows].contiguous()
        self.self_attn.folded_short_attention(x, self.input_layernorm.eps, None, tables, residual, self.residual_scale,
                                              rows)
        flat = residual.view(-1, residual.shape[-1])
        self.mlp.add_folded_plain_(flat, self.post_attention_layernorm, self.residual_scale)
        return residual

    def folded_decode(self, x: torch.Tensor, rope_tables: RopeTables | None,
                      k_cache: torch.Tensor, v_cache: torch.Tensor,
                      index: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """normed_decode for more rows, with both norm weights folded into the qkv and gate_up
        weights: rope_kv_write and swiglu compute and apply the norms' statistics; x updated in
        place and returned."""
        self.self_attn.folded_decode(x, self.input_layernorm.eps, rope_tables, k_cache, v_cache, index,
                                     self.residual_scale)
        return self.mlp.add_folded_plain_(x, self.post_attention_layernorm, self.residual_scale)

    def normed_decode(self, x: torch.Tensor, rope_tables: RopeTables | None,
                      k_cache: torch.Tensor, v_cache: torch.Tensor,
                      index: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """decode() in the manner of normed_forward: x [B, hidden] updated in place and returned."""
        self.self_attn.normed_decode(x, self.input_layernorm, rope_tables, k_cache, v_cache, index,
                                     self.residual_scale)
        return self.mlp.add_normed_(x, self.post_attention_layernorm, self.residual_scale)


class MiniCPMModel(nn.Module):
    """Embedding (when vocab_size > 0), decoder layers, final norm, optional LongRoPE."""

    def __init__(self, config: LMConfig, max_positions: int):
        super().__init__()
        self.config = config
        if config.vocab_size > 0:
            self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rope = None if config.no_rope else LongRoPE(config, max_positions)
        # Set by fast_path.enable_custom_ops: norms and residual adds run as rmsnorm/add_rmsnorm ops.
        self.fused_norms = False
        self._rope_tables: RopeTables | None = None

    def _next_norms(self) -> list[RMSNorm]:
        """The norm applied after each layer's final residual add when adds and norms are fused."""
        return [layer.input_layernorm for layer in self.layers[1:]] + [self.norm]

    def forward(self, x: torch.Tensor, causal: bool, rows: slice | None = None,
                owned: bool = False) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        """x [B, T, hidden] -> (normed hidden [B, T, hidden], per-layer (k, v) [B, Hkv, T, d]; each
        (None, None) where the short_attention op ran: non-causal short sequences on the custom ops).
        `rows` (non-causal only): the positions whose output the caller uses; the last layer then
        runs o_proj, the residual adds, the MLP and the final norm on those rows alone (attention
        still reads every key) and the hidden states returned are [B, len(rows), hidden].
        `owned`: x is a contiguous tensor the caller no longer needs, so the fused paths update it in
        place instead of a copy."""
        rope = None
        use_ops = self.fused_norms and (ops.library.kernel_ready(x) or not x.is_cuda)
        if use_ops and self._short_attention_fits(x, causal):
            rope = ShortAttentionOp(*(self.rope_tables() or (None, None)))
        elif self.rope is not None:
            if use_ops:
                rope = self._rope_op(x.shape[0], x.shape[1], x)
            else:
                rope = self.rope(torch.arange(x.shape[1], device=x.device))
        # On the GPU only the short_attention op trims the last layer to `rows`: with SDPA on a slice
        # of the queries, CUDA-graph capture of the tiny fp32 VoxCPM1.5 step failed on the H200
        # (run 6); there every row is computed and the wanted ones are sliced at the end.
        trimmed = rows if isinstance(rope, ShortAttentionOp) or not x.is_cuda else None
        rows_per_layer = [None] * (len(self.layers) - 1) + [trimmed]
        kv = []
        normed = isinstance(rope, ShortAttentionOp) and self._norms_in_gemms(x)
        folded = isinstance(rope, ShortAttentionOp) and self._folded_norms_take(x)
        plain = isinstance(rope, ShortAttentionOp) and not (normed or folded) and self._folded_plain_takes(x)
        if self.fused_norms and not owned:
            x = x.contiguous().clone()  # the fused paths update the residual stream in place
        if normed or folded or plain:
            for layer, layer_rows in zip(self.layers, rows_per_layer):
                run = layer.normed_forward if normed else layer.folded_forward if folded else layer.folded_plain_forward
                x = run(x, rope, layer_rows)
            return ops.rmsnorm(x, self.norm.weight, self.norm.eps), [(None, None)] * len(self.layers)
        if self.fused_norms:
            h = ops.rmsnorm(x, self.layers[0].input_layernorm.weight, self.layers[0].input_layernorm.eps)
            for layer, next_norm, layer_rows in zip(self.layers, self._next_norms(), rows_per_layer):
                h, k, v = layer.fused_forward(x, h, rope, causal, next_norm, layer_rows)
                kv.append((k, v))
        else:
            for layer, layer_rows in zip(self.layers, rows_per_layer):
                x, k, v = layer(x, rope, causal, layer_rows)
                kv.append((k, v))
            h = self.norm(x)
        return (h[:, rows] if rows is not None and trimmed is None else h), kv

    def _norms_in_gemms(self, x: torch.Tensor) -> bool:
        """Whether the layers run with their norms and residual adds inside the skinny_gemm
        kernels (normed_forward / normed_decode): custom ops on, and the kernel takes the rows
        (at most 32, bf16/fp16 on the GPU; VOXCPM_SKINNY_NORMS=0 says no)."""
        if not self.fused_norms:
            return False
        layer = self.layers[0]
        return (ops.skinny_linear.takes_normed(x, layer.self_attn.qkv_weight)
                and ops.skinny_linear.takes_normed(x, layer.mlp.gate_up_weight))

    def _folded_norms_take(self, x: torch.Tensor) -> bool:
        """Whether the layers run with their norm weights folded into their GEMMs (folded_forward):
        custom ops on, folded weights given, at least FOLDED_NORMS_MIN_ROWS rows, and no FP8 copies
        (the opt-in FP8 mode keeps its own path)."""
        layer = self.layers[0]
        return (self.fused_norms and layer.self_attn.folded_qkv is not None and layer.mlp.folded_gate_up is not None
                and layer.mlp.fp8_gate_up is None and x.shape[0] * x.shape[1] >= FOLDED_NORMS_MIN_ROWS)

    def _folded_statistics_given(self) -> bool:
        """Whether the layers can run with their norm weights folded into their qkv and gate_up
        GEMMs and the statistics computed by the kernels after them (folded_decode,
        folded_plain_forward): custom ops on and fast_path.enable_folded_statistics gave this stack
        its folded weights. The callers rule out the few-row normed path first."""
        layer = self.layers[0]
        return (self.fused_norms and layer.self_attn.folded_qkv is not None
                and layer.mlp.folded_plain_gate_up is not None)

    def _folded_plain_takes(self, x: torch.Tensor) -> bool:
        """Whether whole short sequences run folded_plain_forward: the folded weights given (LocEnc's
        or the LocDiT's, fast_path.enable_folded_statistics), no FP8 copies (the opt-in FP8 mode
        keeps its own path), more rows than skinny_gemm takes (short_attention reads the residual
        rows before its programmatic wait, so the qkv GEMM before it must not be a kernel that
        releases it early, as skinny_gemm does) and at most ATTENTION_STATISTIC_MAX_ROWS. The
        caller has ruled out the normed and folded paths."""
        rows = x.shape[0] * x.shape[1]
        return (self._folded_statistics_given() and self.layers[0].mlp.fp8_gate_up is None
                and ops.skinny_linear.PLAIN_MAX_ROWS < rows <= ATTENTION_STATISTIC_MAX_ROWS)

    def _short_attention_fits(self, x: torch.Tensor, causal: bool) -> bool:
        """Whether the short_attention op serves this call: LocEnc / LocDiT-like bidirectional
        sequences short enough for it (longer ones keep rope_kv_write + SDPA), a head size its kernel
        has on the GPU."""
        head_dim = self.layers[0].self_attn.head_dim
        return (not causal and x.shape[1] <= SHORT_ATTENTION_MAX_LEN
                and (head_dim in SHORT_ATTENTION_HEAD_DIMS or not x.is_cuda))

    def _rope_op(self, batch: int, length: int, like: torch.Tensor) -> RopeOp:
        """Rotation of a [batch, length] sequence by the op (without the op library loaded, the
        op's reference would index with a host-synchronising mask: CPU only then)."""
        cos, sin = self.rope_tables()
        positions = torch.arange(length, dtype=torch.int32, device=like.device).repeat(batch)
        attention = self.layers[0].self_attn
        shape = (1, attention.num_kv_heads, 1, attention.head_dim)
        return RopeOp(positions, torch.full_like(positions, -1), cos, sin, like.new_zeros(shape), like.new_zeros(shape))

    def rope_tables(self) -> RopeTables | None:
        """Float32 contiguous LongRoPE tables for rope_kv_write (cached: built before graph capture)."""
        if self.rope is None:
            return None
        if self._rope_tables is None or self._rope_tables[0].device != self.rope.cos_table.device:
            self._rope_tables = (self.rope.cos_table.float().contiguous(), self.rope.sin_table.float().contiguous())
        return self._rope_tables

    def decode(self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, where: DecodeSlots) -> torch.Tensor:
        """x [B, hidden]; caches [layers, slots, Hkv, max_context, d] -> normed hidden [B, hidden]."""
        rope = None
        if where.kernel_index is not None:
            rope = self.rope_tables()
        elif self.rope is not None:
            cos, sin = self.rope(where.positions)
            rope = (cos[:, None, None, :], sin[:, None, None, :])
        normed = where.kernel_index is not None and self._norms_in_gemms(x)
        folded = where.kernel_index is not None and not normed and self._folded_statistics_given()
        if self.fused_norms:
            x = x.contiguous().clone()  # the fused paths update the residual stream in place
        if normed or folded:
            for index, layer in enumerate(self.layers):
                run = layer.normed_decode if normed else layer.folded_decode
                x = run(x, rope, k_cache[index], v_cache[index], where.kernel_index)
            return ops.rmsnorm(x, self.norm.weight, self.norm.eps)
        if self.fused_norms:
            h = ops.rmsnorm(x, self.layers[0].input_layernorm.weight, self.layers[0].input_layernorm.eps)
            for index, (layer, next_norm) in enumerate(zip(self.layers, self._next_norms())):
                h = layer.fused_decode(x, h, rope, k_cache[index], v_cache[index], where, next_norm)
            return h
        for index, layer in enumerate(self.layers):
            x = layer.decode(x, rope, k_cache[index], v_cache[index], where)
        return self.norm(x)
