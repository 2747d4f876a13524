"""VoxCPMModel: everything of a VoxCPM checkpoint except the AudioVAE, for both architectures.

Attribute names mirror the official checkpoint keys (`base_lm.*`, `residual_lm.*`, `feat_encoder.*`,
`feat_decoder.estimator.*`, `fsq_layer.*`, projections, `stop_*`), so `state_dict()` is exactly
model.safetensors. The methods are the pieces of one generation step; the engine's runner strings
them together for a batch of streams.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from voxcpm_triton.config import ModelConfig
from voxcpm_triton.model.attention import DecodeSlots
from voxcpm_triton.model.flow_matching import FlowMatching
from voxcpm_triton.model.fsq import ScalarQuantization
from voxcpm_triton.model.local_dit import LocalDiT
from voxcpm_triton.model.local_encoder import LocalEncoder
from voxcpm_triton.model.minicpm import MiniCPMModel
from voxcpm_triton.model.projection import Projection


@dataclass
class PrefillOutput:
    """Outputs of the two LMs over a whole prompt sequence (batch of right-padded sequences)."""

    lm_hidden: torch.Tensor  # [B, T, H] base-LM output, FSQ'd at audio positions
    residual_hidden: torch.Tensor  # [B, T, H]
    base_kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer [B, Hkv, T, d]
    residual_kv: list[tuple[torch.Tensor, torch.Tensor]]


class VoxCPMModel(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        hidden = config.lm.hidden_size
        self.base_lm = MiniCPMModel(config.lm, max_positions=config.max_length)
        self.residual_lm = MiniCPMModel(config.residual_lm, max_positions=config.max_length)
        self.feat_encoder = LocalEncoder(config.encoder_lm, config.feat_dim, config.patch_size)
        estimator = LocalDiT(config.dit_lm, config.feat_dim, config.patch_size, version=2 if config.is_v2 else 1)
        self.feat_decoder = FlowMatching(estimator, mean_mode=config.dit_mean_mode)
        self.fsq_layer = ScalarQuantization(hidden, config.scalar_quantization_latent_dim,
                                            config.scalar_quantization_scale)
        self.enc_to_lm_proj = Projection(config.encoder.hidden_dim, hidden)
        self.lm_to_dit_proj = Projection(hidden, config.dit.hidden_dim)
        self.res_to_dit_proj = Projection(hidden, config.dit.hidden_dim)
        if config.is_v2:
            self.fusion_concat_proj = Projection(2 * hidden, hidden)
        self.stop_proj = Projection(hidden, hidden)
        self.stop_head = nn.Linear(hidden, 2, bias=False)

    def embed_patches(self, patches: torch.Tensor) -> torch.Tensor:
        """Latent patches [B, T, P, D] -> LM-width embeddings [B, T, H]."""
        return self.enc_to_lm_proj(self.feat_encoder(patches))

    def residual_input(self, lm_hidden: torch.Tensor, patch_embed: torch.Tensor) -> torch.Tensor:
        """Residual-LM input from the (FSQ'd) base-LM output and the masked patch embedding."""
        if self.config.is_v2:
            return self.fusion_concat_proj(torch.cat((lm_hidden, patch_embed), dim=-1))
        return lm_hidden + patch_embed

    def prefill(self, tokens: torch.Tensor, feats: torch.Tensor, text_mask: torch.Tensor,
                audio_mask: torch.Tensor, with_audio: bool = True) -> PrefillOutput:
        """tokens/text_mask/audio_mask [B, T], feats [B, T, P, D] (right padding is harmless: causal).

        with_audio=False promises that audio_mask is all zero (zero-shot prompts): the LocEnc pass
        over every position and the FSQ, whose outputs the mask would zero anyway, are skipped. That
        is ~37% of a VoxCPM2 prefill's FLOPs, and the result is the same."""
        dtype = self.stop_proj.weight.dtype
        text_mask = text_mask.to(dtype).unsqueeze(-1)
        text_embed = self.base_lm.embed_tokens(tokens) * self.config.lm.embed_scale
        if with_audio:
            audio_mask = audio_mask.to(dtype).unsqueeze(-1)
            patch_embed = audio_mask * self.embed_patches(feats.to(dtype))
            lm_out, base_kv = self.base_lm(text_mask * text_embed + patch_embed, causal=True)
            lm_out = self.fsq_layer(lm_out) * audio_mask + lm_out * text_mask
        else:
            patch_embed = torch.zeros_like(text_embed)
            lm_out, base_kv = self.base_lm(text_mask * text_embed, causal=True)
            lm_out = lm_out * text_mask
        residual_out, residual_kv = self.residual_lm(self.residual_input(lm_out, patch_embed), causal=True)
        return PrefillOutput(lm_out, residual_out, base_kv, residual_kv)

    def dit_condition(self, lm_hidden: torch.Tensor, residual_hidden: torch.Tensor) -> torch.Tensor:
        """[B, H] x 2 -> LocDiT conditioning: concatenated tokens (v2) or their sum (v1)."""
        lm_part = self.lm_to_dit_proj(lm_hidden)
        residual_part = self.res_to_dit_proj(residual_hidden)
        if self.config.is_v2:
            return torch.cat((lm_part, residual_part), dim=-1)
        return lm_part + residual_part

    def stop_logits(self, lm_hidden: torch.Tensor) -> torch.Tensor:
        return self.stop_head(F.silu(self.stop_proj(lm_hidden)))

    def decode_lms(self, patch_embed: torch.Tensor, base_cache: tuple[torch.Tensor, torch.Tensor],
                   residual_cache: tuple[torch.Tensor, torch.Tensor],
                   where: DecodeSlots) -> tuple[torch.Tensor, torch.Tensor]:
        """Feed each stream's newest patch embedding [B, H] through both LMs at its own position."""
        lm_hidden = self.fsq_layer(self.base_lm.decode(patch_embed, *base_cache, where))
        residual_hidden = self.residual_lm.decode(self.residual_input(lm_hidden, patch_embed), *residual_cache, where)
        return lm_hidden, residual_hidden


def build_model(config: ModelConfig) -> VoxCPMModel:
    """A randomly initialised model (float32, CPU) whose state_dict keys match model.safetensors."""
    return VoxCPMModel(config)
