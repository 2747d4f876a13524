"""MiniCPM-4 transformer stack: the base LM, the residual LM and the backbones of LocEnc and LocDiT.

Two entry points per stack: `forward` runs whole sequences (prefill, LocEnc, LocDiT), `decode`
advances a batch of streams by one token against a per-slot KV cache, each stream at its own
position. Numerics follow the reference: RMSNorm statistics and RoPE rotation in float32, then back
to the weights' dtype.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from voxcpm_triton import ops
from voxcpm_triton.config import LMConfig
from voxcpm_triton.ops import gate_up_sm90
from voxcpm_triton.ops.fp8_linear import SWIGLU, Fp8Weight, fp8_linear, fp8_takes, routed_linear
from voxcpm_triton.ops.short_attention import KERNEL_HEAD_DIMS as SHORT_ATTENTION_HEAD_DIMS
from voxcpm_triton.ops.short_attention import MAX_SEQ_LEN as SHORT_ATTENTION_MAX_LEN

# Rows (sequences x tokens) from which a stack with folded norm weights (fast_path.enable_folded_norms)
# runs them: measured from 1408 rows (64 LocDiT streams) up, perf/RESULTS.md run 62.
FOLDED_NORMS_MIN_ROWS = 1024


def rms_norm(hidden: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    variance = hidden.to(torch.float32).pow(2).mean(dim=-1, keepdim=True)
    return (hidden * torch.rsqrt(variance + eps)).to(hidden.dtype) * weight


class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return rms_norm(hidden, self.weight, self.eps)


class LongRoPE(nn.Module):
    """Rotary tables with LongRoPE frequency divisors and attention scaling.

    The reference picks the long or short divisors once, from max_position_embeddings, so every
    position uses the same set; tables are built for `max_positions` rows only (entries do not
    depend on the table length).
    """

    def __init__(self, config: LMConfig, max_positions: int):
        super().__init__()
        dim = config.head_dim
        scaling = config.rope_scaling
        original = scaling.original_max_position_embeddings
        scale = config.max_position_embeddings / original
        attention_factor = math.sqrt(1 + math.log(scale) / math.log(original))
        divisors = scaling.long_factor if config.max_position_embeddings > original else scaling.short_factor
        inv_freq = 1.0 / (config.rope_theta ** (torch.arange(0, dim, 2).float() / dim))
        positions = torch.arange(max_positions, dtype=torch.float32)
        freqs = torch.outer(positions, 1.0 / torch.tensor(divisors, dtype=torch.float32)) * inv_freq
        angles = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_table", angles.cos() * attention_factor, persistent=False)
        self.register_buffer("sin_table", angles.sin() * attention_factor, persistent=False)

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.cos_table[positions], self.sin_table[positions]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate `x` [..., head_dim] by tables broadcastable to it; math in float32."""
    x32 = x.to(torch.float32)
    first, second = x32.chunk(2, dim=-1)
    rotated = torch.cat((-second, first), dim=-1)
    return (x32 * cos + rotated * sin).to(x.dtype)


@dataclass
class DecodeSlots:
    """Where each row of a decode batch lives in the KV cache.

    slots/positions: LongTensor[B] on the device; positions is the index the new token is written
    to, so each stream attends to cache rows [0, positions]. `span` (host int) is how many cache
    rows the batch reads: max(positions) + 1 eagerly, the whole cache in a CUDA graph (one shape
    for every mix of lengths). `kernel_index` (int32 slot ids, positions, lengths) switches
    attention to the rope_kv_write + decode_attention ops, which read only each stream's live rows.
    """

    slots: torch.Tensor
    positions: torch.Tensor
    span: int
    kernel_index: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
    _live: torch.Tensor | None = None

    @property
    def live(self) -> torch.Tensor:
        """Attention mask [B, 1, 1, span]: True where a cache row belongs to the stream's prefix."""
        if self._live is None:
            rows = torch.arange(self.span, device=self.positions.device)
            self._live = (rows.unsqueeze(0) <= self.positions.unsqueeze(1))[:, None, None, :]
        return self._live


@dataclass
class RopeOp:
    """Rotary embedding of whole sequences through the rope_kv_write op (custom-ops path): q and
    k heads rotated in one kernel; slot ids are all -1, so nothing is written to the caches."""

    positions: torch.Tensor  # int32 [B * T]
    no_slot: torch.Tensor  # int32 [B * T], all -1
    cos: torch.Tensor  # float32 [positions, d]
    sin: torch.Tensor
    no_k_cache: torch.Tensor  # [1, Hkv, 1, d] each (the op's two caches must not alias)
    no_v_cache: torch.Tensor


@dataclass
class ShortAttentionOp:
    """Non-causal attention of short sequences (LocEnc, LocDiT) through the short_attention op:
    RoPE, softmax attention and the head layout in one kernel reading the fused qkv output. cos/sin
    are the float32 tables (None without RoPE). Nothing is cached, so no k/v come back."""

    cos: torch.Tensor | None
    sin: torch.Tensor | None


class Attention(nn.Module):
    def __init__(self, config: LMConfig):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.q_proj = nn.Linear(config.hidden_size, self.num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, self.num_kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, self.num_kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=False)
        # [q; k; v] weight whose parts the three projections view (fast_path.fuse_weights).
        self.qkv_weight: torch.Tensor | None = None
        # FP8 copy of the fused qkv (fast_path.enable_fp8), used at many rows. o_proj has none: its
        # FP8 GEMM, quantisation included, lost to bf16 at every LocDiT row count measured (run 9).
        self.fp8_qkv: Fp8Weight | None = None
        # The fused qkv times the input norm's weight along k (fast_path.enable_folded_norms).
        self.folded_qkv: torch.Tensor | None = None

    def _out(self, x: torch.Tensor) -> torch.Tensor:
        """o_proj; on the custom ops through ops.linear (the few-row GEMM kernel at small batches)."""
        return self.o_proj(x) if self.qkv_weight is None else ops.linear(x, self.o_proj.weight)

    def _qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Projections [..., H * d] each; one GEMM when the weights are fused."""
        if self.qkv_weight is None:
            return self.q_proj(x), self.k_proj(x), self.v_proj(x)
        return self._split(routed_linear(x, self.qkv_weight, self.fp8_qkv))

    def _split(self, qkv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        kv_width = self.num_kv_heads * self.head_dim
        return qkv.split((self.num_heads * self.head_dim, kv_width, kv_width), dim=-1)

    def _project(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None):
        """x [..., T, hidden] -> q [..., Hq, T, d], k/v [..., Hkv, T, d] with RoPE applied."""
        *lead, length, _ = x.shape
        q, k, v = self._qkv(x)
        q = q.reshape(*lead, length, self.num_heads, self.head_dim).transpose(-3, -2)
        k = k.reshape(*lead, length, self.num_kv_heads, self.head_dim).transpose(-3, -2)
        v = v.reshape(*lead, length, self.num_kv_heads, self.head_dim).transpose(-3, -2)
        if rope is not None:
            cos, sin = rope
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        return q, k, v

    def _project_rope_op(self, x: torch.Tensor, rope: RopeOp):
        """_project with the fused q/k/v weight and the rope op (x [B, T, hidden])."""
        batch, length, _ = x.shape
        rotated_heads = self.num_heads + self.num_kv_heads
        qkv = routed_linear(x, self.qkv_weight, self.fp8_qkv)
        qkv = qkv.view(batch * length, rotated_heads + self.num_kv_heads, self.head_dim)
        k, v = qkv[:, self.num_heads:rotated_heads], qkv[:, rotated_heads:]
        rotated = ops.rope_kv_write(qkv[:, :rotated_heads], k, v, rope.no_k_cache, rope.no_v_cache, rope.positions,
                                    rope.no_slot, rope.cos, rope.sin)
        q = rotated[:, :self.num_heads].view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)
        k = rotated[:, self.num_heads:].view(batch, length, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = v.reshape(batch, length, self.num_kv_heads, self.head_dim).transpose(1, 2)
        return q, k, v

    def _short_attention_op(self, x: torch.Tensor, tables: ShortAttentionOp) -> torch.Tensor:
        """Attention output [B * T, Hq * d] of whole sequences x [B, T, hidden] by the op."""
        batch, length, hidden = x.shape
        qkv = routed_linear(x.reshape(batch * length, hidden), self.qkv_weight, self.fp8_qkv)
        return ops.short_attention(qkv, length, self.num_heads, self.num_kv_heads, tables.cos, tables.sin)

    def forward(
        self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | RopeOp | ShortAttentionOp | None, causal: bool,
        rows: slice | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """x [B, T, hidden] -> (out [B, T', hidden], k, v [B, Hkv, T, d]); k and v are None when
        `rope` is a ShortAttentionOp (non-causal, never cached). `rows` (non-causal only): the query
        positions whose output is wanted, T' of them; keys and values still cover all T."""
        if rows is not None and causal:
            raise ValueError("rows selects query positions of non-causal attention only")
        batch, length, _ = x.shape
        width = self.num_heads * self.head_dim
        if isinstance(rope, ShortAttentionOp):
            out = self._short_attention_op(x, rope).view(batch, length, width)
            return self._out(out if rows is None else out[:, rows].contiguous()), None, None
        if isinstance(rope, RopeOp):
            q, k, v = self._project_rope_op(x, rope)
        else:
            q, k, v = self._project(x, rope)
        if rows is not None:
            q = q[:, :, rows]
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        return self._out(out.transpose(1, 2).reshape(batch, q.shape[2], width)), k, v

    def decode(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor] | None,
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        where: DecodeSlots,
    ) -> torch.Tensor:
        """x [B, hidden]; caches [slots, Hkv, max_context, d]. Writes this token's K/V, attends to
        each stream's live prefix only (rows beyond a stream's position are masked)."""
        batch = x.shape[0]
        if where.kernel_index is not None:
            return self._decode_kernels(x, rope, k_cache, v_cache, where.kernel_index)
        q, k, v = self._project(x.unsqueeze(1), rope)  # q [B, Hq, 1, d], k/v [B, Hkv, 1, d]
        k_cache[where.slots, :, where.positions] = k[:, :, 0]
        v_cache[where.slots, :, where.positions] = v[:, :, 0]
        keys = k_cache[where.slots, :, : where.span]
        values = v_cache[where.slots, :, : where.span]
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=where.live, enable_gqa=True)
        return self._out(out.reshape(batch, self.num_heads * self.head_dim))

    def _decode_kernels(self, x: torch.Tensor, rope_tables: tuple[torch.Tensor, torch.Tensor] | None,
                        k_cache: torch.Tensor, v_cache: torch.Tensor,
                        index: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """Graph-friendly decode: rope_tables are the float32 [positions, d] tables (or None)."""
        return self._out(self._cached_attention(self._qkv(x), rope_tables, k_cache, v_cache, index))

    def _cached_attention(self, qkv: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
                          rope_tables: tuple[torch.Tensor, torch.Tensor] | None, k_cache: torch.Tensor,
                          v_cache: torch.Tensor,
                          index: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """One token per stream through rope_kv_write + decode_attention -> [B, Hq * d]."""
        q, k, v = qkv  # views into one [B, (Hq + 2 Hkv) d] output are fine for the ops
        batch = q.shape[0]
        slot_ids, positions, lengths = index
        q = q.view(batch, self.num_heads, self.head_dim)
        k = k.view(batch, self.num_kv_heads, self.head_dim)
        v = v.view(batch, self.num_kv_heads, self.head_dim)
        cos, sin = rope_tables if rope_tables is not None else (None, None)
        q = ops.rope_kv_write(q, k, v, k_cache, v_cache, positions, slot_ids, cos, sin)
        out = ops.decode_attention(q, k_cache, v_cache, slot_ids, lengths)
        return out.reshape(batch, self.num_heads * self.head_dim)

    def normed_short_attention(self, x: torch.Tensor, norm: RMSNorm, tables: ShortAttentionOp, residual: torch.Tensor,
                               scale: float, rows: slice | None) -> torch.Tensor:
        """residual += scale * attention(norm(x)) in place, for whole sequences x [B, T, hidden] of
        a few rows (custom ops): the norm runs inside the qkv GEMM and the add inside o_proj's.
        `rows` picks the query positions kept (residual is [B, T', hidden] then)."""
        batch, length, hidden = x.shape
        qkv = ops.normed_linear(x.view(batch * length, hidden), self.qkv_weight, norm.weight, norm.eps)
        return self._attend_and_add_(qkv, batch, length, tables, residual, scale, rows)

    def folded_short_attention(self, x: torch.Tensor, row_scale: torch.Tensor, tables: ShortAttentionOp,
                               residual: torch.Tensor, scale: float, rows: slice | None) -> torch.Tensor:
        """normed_short_attention for many rows with the norm's weight folded into folded_qkv: the
        GEMM reads x itself and short_attention applies the norm's row statistic (row_scale, [B, T])
        as it loads q, k and v; the add runs in o_proj's epilogue where cuBLASLt has an algorithm
        for it."""
        batch, length, hidden = x.shape
        qkv = ops.linear(x.view(batch * length, hidden), self.folded_qkv)
        return self._attend_and_add_(qkv, batch, length, tables, residual, scale, rows, row_scale.view(batch * length))

    def _attend_and_add_(self, qkv: torch.Tensor, batch: int, length: int, tables: ShortAttentionOp,
                         residual: torch.Tensor, scale: float, rows: slice | None,
                         row_scale: torch.Tensor | None = None) -> torch.Tensor:
        """residual += scale * o_proj(short_attention(qkv)) for the query positions `rows` (all when
        None), the add inside o_proj's GEMM; the tail of normed_ and folded_short_attention."""
        out = ops.short_attention(qkv, length, self.num_heads, self.num_kv_heads, tables.cos, tables.sin,
                                  row_scale=row_scale)
        out = out.view(batch, length, self.num_heads * self.head_dim)
        return ops.linear_residual_(out if rows is None else out[:, rows].contiguous(), self.o_proj.weight, residual,
                                    scale)

    def normed_decode(self, x: torch.Tensor, norm: RMSNorm, rope_tables: tuple[torch.Tensor, torch.Tensor] | None,
                      k_cache: torch.Tensor, v_cache: torch.Tensor,
                      index: tuple[torch.Tensor, torch.Tensor, torch.Tensor], scale: float) -> torch.Tensor:
        """x += scale * decode attention of norm(x) in place (x [B, hidden], the residual stream),
        the norm inside the qkv GEMM and the add inside o_proj's."""
        qkv = self._split(ops.normed_linear(x, self.qkv_weight, norm.weight, norm.eps))
        out = self._cached_attention(qkv, rope_tables, k_cache, v_cache, index)
        return ops.linear_residual_(out, self.o_proj.weight, x, scale)


class MLP(nn.Module):
    def __init__(self, config: LMConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.up_proj = nn.Linear(config.hidden_size, config.intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.intermediate_size, config.hidden_size, bias=False)
        # [gate; up] weight whose halves gate_proj/up_proj view (fast_path.fuse_weights): one
        # GEMM and the swiglu op instead of two GEMMs and three elementwise kernels.
        self.gate_up_weight: torch.Tensor | None = None
        # FP8 copies of the fused gate_up and of down_proj (fast_path.enable_fp8), used at many rows.
        self.fp8_gate_up: Fp8Weight | None = None
        self.fp8_down: Fp8Weight | None = None
        # gate_up_weight interleaved for the Hopper kernel with SwiGLU in its epilogue
        # (fast_path.enable_sm90_gate_up), used at many rows.
        self.gate_up_interleaved: torch.Tensor | None = None
        # The same times the post-attention norm's weight along k (fast_path.enable_folded_norms).
        self.folded_gate_up: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_up_weight is not None and fp8_takes(x, self.fp8_gate_up) and fp8_takes(x, self.fp8_down):
            # SwiGLU folds into the quantisation of the down projection's input.
            return fp8_linear(fp8_linear(x, self.fp8_gate_up), self.fp8_down, SWIGLU)
        if self.gate_up_weight is not None:
            return ops.linear(ops.gate_up_swiglu(x, self.gate_up_weight, self.gate_up_interleaved),
                              self.down_proj.weight)
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    def add_normed_(self, x: torch.Tensor, norm: RMSNorm, scale: float) -> torch.Tensor:
        """x += scale * mlp(norm(x)) in place for a few rows (custom ops): the norm inside the
        gate_up GEMM, the add inside down_proj's."""
        hidden = ops.normed_gate_up_swiglu(x, self.gate_up_weight, norm.weight, norm.eps)
        return ops.linear_residual_(hidden, self.down_proj.weight, x, scale)

    def add_folded_(self, x: torch.Tensor, norm: RMSNorm, scale: float) -> torch.Tensor:
        """add_normed_ for many rows with the norm's weight folded into folded_gate_up: the Hopper
        gate_up kernel applies the norm's row statistic in its epilogue."""
        flat = x.view(-1, x.shape[-1])
        hidden = gate_up_sm90.scaled(flat, self.folded_gate_up, ops.row_scale(flat, norm.eps))
        return ops.linear_residual_(hidden, self.down_proj.weight, flat, scale).view(x.shape)


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

    def forward(self, x: torch.Tensor, rope, causal: bool,
                rows: slice | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """`rows`: the positions whose output is wanted (non-causal only; see MiniCPMModel.forward)."""
        attn, k, v = self.self_attn(self.input_layernorm(x), rope, causal, rows)
        x = self._add(x if rows is None else x[:, rows], attn)
        x = self._add(x, self.mlp(self.post_attention_layernorm(x)))
        return x, k, v

    def decode(self, x: torch.Tensor, rope, k_cache: torch.Tensor, v_cache: torch.Tensor,
               where: DecodeSlots) -> torch.Tensor:
        x = self._add(x, self.self_attn.decode(self.input_layernorm(x), rope, k_cache, v_cache, where))
        return self._add(x, self.mlp(self.post_attention_layernorm(x)))

    def _fused_tail(self, x: torch.Tensor, attn: torch.Tensor, next_norm: RMSNorm) -> torch.Tensor:
        """Residual adds folded into add_rmsnorm (x updated in place); returns next_norm(x)."""
        eps = self.post_attention_layernorm.eps
        h = ops.add_rmsnorm(x, attn, self.post_attention_layernorm.weight, eps, self.residual_scale)
        return ops.add_rmsnorm(x, self.mlp(h), next_norm.weight, next_norm.eps, self.residual_scale)

    def fused_forward(self, x: torch.Tensor, h: torch.Tensor, rope, causal: bool, next_norm: RMSNorm,
                      rows: slice | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """forward() on the custom ops: h = input_layernorm(x) from the previous layer; x (the
        residual stream) is updated in place, or a copy of its `rows` when given; returns
        (next_norm(x), k, v)."""
        attn, k, v = self.self_attn(h, rope, causal, rows)
        return self._fused_tail(x if rows is None else x[:, rows].contiguous(), attn, next_norm), k, v

    def fused_decode(self, x: torch.Tensor, h: torch.Tensor, rope, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     where: DecodeSlots, next_norm: RMSNorm) -> torch.Tensor:
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
        statistic (ops.row_scale), which the consumers of the two GEMMs apply."""
        residual = x if rows is None else x[:, rows].contiguous()
        row_scale = ops.row_scale(x, self.input_layernorm.eps)
        self.self_attn.folded_short_attention(x, row_scale, tables, residual, self.residual_scale, rows)
        return self.mlp.add_folded_(residual, self.post_attention_layernorm, self.residual_scale)

    def normed_decode(self, x: torch.Tensor, rope_tables: tuple[torch.Tensor, torch.Tensor] | None,
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
        self._rope_tables: tuple[torch.Tensor, torch.Tensor] | None = None

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
        if self.fused_norms and not owned:
            x = x.contiguous().clone()  # the fused paths update the residual stream in place
        if normed or folded:
            for layer, layer_rows in zip(self.layers, rows_per_layer):
                x = layer.normed_forward(x, rope, layer_rows) if normed else layer.folded_forward(x, rope, layer_rows)
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

    def rope_tables(self) -> tuple[torch.Tensor, torch.Tensor] | None:
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
        if self.fused_norms:
            x = x.contiguous().clone()  # the fused paths update the residual stream in place
        if normed:
            for index, layer in enumerate(self.layers):
                x = layer.normed_decode(x, rope, k_cache[index], v_cache[index], where.kernel_index)
            return ops.rmsnorm(x, self.norm.weight, self.norm.eps)
        if self.fused_norms:
            h = ops.rmsnorm(x, self.layers[0].input_layernorm.weight, self.layers[0].input_layernorm.eps)
            for index, (layer, next_norm) in enumerate(zip(self.layers, self._next_norms())):
                h = layer.fused_decode(x, h, rope, k_cache[index], v_cache[index], where, next_norm)
            return h
        for index, layer in enumerate(self.layers):
            x = layer.decode(x, rope, k_cache[index], v_cache[index], where)
        return self.norm(x)
