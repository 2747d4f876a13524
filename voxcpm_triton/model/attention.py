"""A MiniCPM layer's self-attention: plain PyTorch, or routed through the custom ops (fused qkv,
short_attention for whole short sequences, rope_kv_write + decode_attention against the per-slot
KV cache), with the norm inside the qkv GEMM and the residual add inside o_proj's where the ops
allow; and the small records that tell it where a batch's rows live."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from voxcpm_triton import ops
from voxcpm_triton.config import LMConfig
from voxcpm_triton.model.rms_norm import RMSNorm
from voxcpm_triton.model.rope import apply_rope
from voxcpm_triton.ops.fp8_linear import Fp8Weight, routed_linear


@dataclass
class DecodeSlots:
    """Where each row of a decode batch lives in the KV cache.

    slots/positions: integer [B] on the device; positions is the index the new token is written
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


RopeTables = tuple[torch.Tensor, torch.Tensor]  # (cos, sin) for the positions being computed


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


# How a whole sequence's attention gets its RoPE: the tables (PyTorch path), one of the two ops, or
# none (no RoPE). Attention.forward dispatches on it.
SequenceRope = RopeTables | RopeOp | ShortAttentionOp | None


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
        # The fused qkv times the input norm's weight along k: the LocDiT's many-row layers
        # (fast_path.enable_folded_norms), and the LMs' decode, LocEnc and the LocDiT's fewer rows, at
        # more rows than skinny_gemm takes (fast_path.enable_folded_statistics).
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

    def _project(self, x: torch.Tensor, rope: RopeTables | None):
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
        self, x: torch.Tensor, rope: SequenceRope, causal: bool,
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
        rope: RopeTables | None,
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

    def _decode_kernels(self, x: torch.Tensor, rope_tables: RopeTables | None,
                        k_cache: torch.Tensor, v_cache: torch.Tensor,
                        index: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """Graph-friendly decode: rope_tables are the float32 [positions, d] tables (or None)."""
        return self._out(self._cached_attention(self._qkv(x), rope_tables, k_cache, v_cache, index))

    def _cached_attention(self, qkv: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
                          rope_tables: RopeTables | None, k_cache: torch.Tensor,
                          v_cache: torch.Tensor, index: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
                          norm_input: torch.Tensor | None = None, norm_eps: float = 1e-6) -> torch.Tensor:
        """One token per stream through rope_kv_write + decode_attention -> [B, Hq * d], as one kernel
        where ops.rope_decode_takes the tensors. `norm_input`: a folded input norm's input rows, whose
        statistic rope_kv_write applies."""
        q, k, v = qkv  # views into one [B, (Hq + 2 Hkv) d] output are fine for the ops
        batch = q.shape[0]
        slot_ids, positions, lengths = index
        q = q.view(batch, self.num_heads, self.head_dim)
        k = k.view(batch, self.num_kv_heads, self.head_dim)
        v = v.view(batch, self.num_kv_heads, self.head_dim)
        cos, sin = rope_tables if rope_tables is not None else (None, None)
        if ops.rope_decode_takes(q, k, v, k_cache, cos):
            out = ops.rope_decode_attention(q, k, v, k_cache, v_cache, positions, slot_ids, lengths, cos, sin,
                                            norm_input, norm_eps)
            return out.reshape(batch, self.num_heads * self.head_dim)
        q = ops.rope_kv_write(q, k, v, k_cache, v_cache, positions, slot_ids, cos, sin, norm_input, norm_eps)
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

    def folded_short_attention(self, x: torch.Tensor, norm_eps: float, row_scale: torch.Tensor | None,
                               tables: ShortAttentionOp, residual: torch.Tensor, scale: float,
                               rows: slice | None) -> torch.Tensor:
        """normed_short_attention for many rows with the norm's weight folded into folded_qkv: the
        GEMM reads x itself and short_attention applies the norm's row statistic as it loads q, k
        and v: row_scale ([B, T], ops.row_scale's) when given, else computed from x; the add runs in
        o_proj's epilogue where cuBLASLt has an algorithm for it."""
        batch, length, hidden = x.shape
        flat = x.view(batch * length, hidden)
        qkv = ops.linear(flat, self.folded_qkv)
        if row_scale is not None:
            return self._attend_and_add_(qkv, batch, length, tables, residual, scale, rows,
                                         row_scale=row_scale.view(batch * length))
        return self._attend_and_add_(qkv, batch, length, tables, residual, scale, rows, norm_input=flat,
                                     norm_eps=norm_eps)

    def _attend_and_add_(self, qkv: torch.Tensor, batch: int, length: int, tables: ShortAttentionOp,
                         residual: torch.Tensor, scale: float, rows: slice | None,
                         row_scale: torch.Tensor | None = None, norm_input: torch.Tensor | None = None,
                         norm_eps: float = 1e-6) -> torch.Tensor:
        """residual += scale * o_proj(short_attention(qkv)) for the query positions `rows` (all when
        None), the add inside o_proj's GEMM; the tail of normed_ and folded_short_attention. A folded
        norm's statistic, which short_attention applies: `row_scale`, or computed from `norm_input`
        (the norm's input rows) as ops.short_attention takes them."""
        out = ops.short_attention(qkv, length, self.num_heads, self.num_kv_heads, tables.cos, tables.sin,
                                  row_scale=row_scale, norm_input=norm_input, norm_eps=norm_eps)
        out = out.view(batch, length, self.num_heads * self.head_dim)
        return ops.linear_residual_(out if rows is None else out[:, rows].contiguous(), self.o_proj.weight, residual,
                                    scale)

    def normed_decode(self, x: torch.Tensor, norm: RMSNorm, rope_tables: RopeTables | None,
                      k_cache: torch.Tensor, v_cache: torch.Tensor,
                      index: tuple[torch.Tensor, torch.Tensor, torch.Tensor], scale: float) -> torch.Tensor:
        """x += scale * decode attention of norm(x) in place (x [B, hidden], the residual stream),
        the norm inside the qkv GEMM and the add inside o_proj's."""
        qkv = self._split(ops.normed_linear(x, self.qkv_weight, norm.weight, norm.eps))
        out = self._cached_attention(qkv, rope_tables, k_cache, v_cache, index)
        return ops.linear_residual_(out, self.o_proj.weight, x, scale)

    def folded_decode(self, x: torch.Tensor, norm_eps: float, rope_tables: RopeTables | None,
                      k_cache: torch.Tensor, v_cache: torch.Tensor,
                      index: tuple[torch.Tensor, torch.Tensor, torch.Tensor], scale: float) -> torch.Tensor:
        """normed_decode for more rows than the few-row GEMM kernel takes, with the norm's weight
        folded into folded_qkv: the GEMM reads x itself, rope_kv_write computes the norm's row
        statistic from x and applies it, and the add runs in o_proj's epilogue."""
        qkv = self._split(ops.linear(x, self.folded_qkv))
        out = self._cached_attention(qkv, rope_tables, k_cache, v_cache, index, norm_input=x, norm_eps=norm_eps)
        return ops.linear_residual_(out, self.o_proj.weight, x, scale)
