"""AudioVAE of the VoxCPM family: causal conv encoder (waveform -> latent frames) and causal conv
decoder (latent frames -> waveform).

v1 (VoxCPM-0.5B, VoxCPM1.5): one sample rate for both directions.
v2 (VoxCPM2): the encoder reads 16 kHz, the decoder writes 48 kHz and is conditioned on the output
rate's bucket (sr_bin_boundaries). v1 and v2 also differ in the left padding of the encoder's
strided convs for odd strides (v2 subtracts stride % 2).

Parameter names equal the official audiovae.pth keys; `fold_weight_norm()` turns every
weight-normalised conv into a plain one for inference.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any, Mapping

import torch
from torch import nn

from voxcpm_triton.config import AUDIO_VAE_DEFAULTS, parse_audio_vae
from voxcpm_triton.audio.vae_layers import (
    CausalConv1d,
    DecoderBlock,
    EncoderBlock,
    SampleRateCondition,
    Snake1d,
    WeightNormConv,
)


@dataclasses.dataclass(frozen=True)
class AudioVAESpec:
    """audio_vae_config of config.json with the reference's defaults for absent keys."""

    version: int
    encoder_dim: int
    encoder_rates: tuple[int, ...]
    latent_dim: int
    decoder_dim: int
    decoder_rates: tuple[int, ...]
    depthwise: bool
    sample_rate: int
    out_sample_rate: int
    sr_bin_boundaries: tuple[int, ...] | None
    cond_type: str = "scale_bias"
    cond_dim: int = 128
    cond_out_layer: bool = False


def audio_vae_defaults(architecture: str) -> dict[str, Any]:
    """The reference's full audio_vae_config for an architecture ("voxcpm2" or "voxcpm")."""
    return copy.deepcopy(AUDIO_VAE_DEFAULTS[architecture])


def parse_audio_vae_spec(raw: Mapping[str, Any] | None, architecture: str) -> AudioVAESpec:
    if architecture not in ("voxcpm2", "voxcpm"):
        raise ValueError(f"architecture={architecture!r}; allowed: 'voxcpm2', 'voxcpm'")
    values = parse_audio_vae(raw, architecture)
    if values.get("use_noise_block"):
        # The noise block draws fresh noise on every decode, which makes streaming and windowed
        # decode differ from offline decode; the released checkpoints do not use it.
        raise ValueError("audio_vae_config.use_noise_block=true is not supported (released models use false)")
    fields = (f.name for f in dataclasses.fields(AudioVAESpec) if f.name != "version")
    return AudioVAESpec(version=2 if architecture == "voxcpm2" else 1, **{name: values[name] for name in fields})


class Encoder(nn.Module):
    def __init__(self, spec: AudioVAESpec) -> None:
        super().__init__()
        width = spec.encoder_dim
        layers: list[nn.Module] = [CausalConv1d(1, width, kernel_size=7, left_pad=6)]
        for stride in spec.encoder_rates:
            groups = width if spec.depthwise else 1
            left_pad = 2 * math.ceil(stride / 2) - (stride % 2 if spec.version == 2 else 0)
            layers.append(EncoderBlock(width, 2 * width, stride, groups, left_pad))
            width *= 2
        self.block = nn.Sequential(*layers)
        self.fc_mu = CausalConv1d(width, spec.latent_dim, kernel_size=3, left_pad=2)
        # Unused at inference (the latent is the mean) but part of the checkpoint.
        self.fc_logvar = CausalConv1d(width, spec.latent_dim, kernel_size=3, left_pad=2)

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        return self.fc_mu(self.block(audio))


class Decoder(nn.Module):
    def __init__(self, spec: AudioVAESpec) -> None:
        super().__init__()
        latent, width = spec.latent_dim, spec.decoder_dim
        if spec.depthwise:
            layers: list[nn.Module] = [
                CausalConv1d(latent, latent, kernel_size=7, left_pad=6, groups=latent),
                CausalConv1d(latent, width, kernel_size=1, left_pad=0),
            ]
        else:
            layers = [CausalConv1d(latent, width, kernel_size=7, left_pad=6)]
        out_dim = width
        for i, stride in enumerate(spec.decoder_rates):
            in_dim, out_dim = width // 2**i, width // 2 ** (i + 1)
            layers.append(DecoderBlock(in_dim, out_dim, stride, groups=out_dim if spec.depthwise else 1))
        layers += [Snake1d(out_dim), CausalConv1d(out_dim, 1, kernel_size=7, left_pad=6), nn.Tanh()]
        self.model = nn.ModuleList(layers)

        self.sr_cond_model: nn.ModuleDict | None = None
        if spec.sr_bin_boundaries is not None:
            self.register_buffer("sr_bin_boundaries", torch.tensor(spec.sr_bin_boundaries, dtype=torch.int32))
            buckets = len(spec.sr_bin_boundaries) + 1
            self.sr_cond_model = nn.ModuleDict(
                {
                    str(i): SampleRateCondition(
                        layer.input_channels, buckets, spec.cond_type, spec.cond_dim, spec.cond_out_layer
                    )
                    for i, layer in enumerate(layers)
                    if isinstance(layer, DecoderBlock)
                }
            )

    def forward(self, z: torch.Tensor, out_sample_rate: int) -> torch.Tensor:
        bucket = None
        if self.sr_cond_model is not None:
            rate = torch.full((z.shape[0],), out_sample_rate, dtype=torch.int32, device=z.device)
            bucket = torch.bucketize(rate, self.sr_bin_boundaries)
        x = z
        for i, layer in enumerate(self.model):
            if bucket is not None and str(i) in self.sr_cond_model:
                x = self.sr_cond_model[str(i)](x, bucket)
            x = layer(x)
        return x


class AudioVAE(nn.Module):
    """encode: [B, T] waveform at `encode_sample_rate` -> [B, latent_dim, frames];
    decode: [B, latent_dim, frames] -> [B, 1, frames * decode_hop_length] at `sample_rate`."""

    def __init__(self, spec: AudioVAESpec) -> None:
        super().__init__()
        self.spec = spec
        self.encoder = Encoder(spec)
        self.decoder = Decoder(spec)

    @property
    def latent_dim(self) -> int:
        return self.spec.latent_dim

    @property
    def encode_sample_rate(self) -> int:
        return self.spec.sample_rate

    @property
    def sample_rate(self) -> int:
        """Rate of the decoded waveform."""
        return self.spec.out_sample_rate

    @property
    def hop_length(self) -> int:
        """Input samples per latent frame."""
        return math.prod(self.spec.encoder_rates)

    @property
    def decode_hop_length(self) -> int:
        """Output samples per latent frame."""
        return math.prod(self.spec.decoder_rates)

    def encode(self, audio: torch.Tensor) -> torch.Tensor:
        if audio.ndim == 2:
            audio = audio.unsqueeze(1)
        if audio.ndim != 3 or audio.shape[1] != 1:
            raise ValueError(f"audio shape {tuple(audio.shape)}; expected [B, T] or [B, 1, T]")
        # Like the reference, pad on the right to whole frames.
        remainder = audio.shape[-1] % self.hop_length
        if remainder:
            audio = nn.functional.pad(audio, (0, self.hop_length - remainder))
        return self.encoder(audio)

    def decode(self, z: torch.Tensor, out_sample_rate: int | None = None) -> torch.Tensor:
        if z.ndim != 3 or z.shape[1] != self.latent_dim:
            raise ValueError(f"latent shape {tuple(z.shape)}; expected [B, {self.latent_dim}, frames]")
        return self.decoder(z, out_sample_rate or self.sample_rate)

    def fold_weight_norm(self) -> "AudioVAE":
        for module in self.modules():
            if isinstance(module, WeightNormConv):
                module.fold()
        return self


def build_audio_vae(config: Any, architecture: str | None = None) -> AudioVAE:
    """AudioVAE from a ModelConfig (uses its `audio_vae` dict and `architecture`) or from a raw
    audio_vae_config dict plus the architecture name."""
    if isinstance(config, Mapping) or config is None:
        if architecture is None:
            raise ValueError("build_audio_vae(dict) needs architecture='voxcpm2' or 'voxcpm'")
        return AudioVAE(parse_audio_vae_spec(config, architecture))
    return AudioVAE(parse_audio_vae_spec(config.audio_vae, architecture or config.architecture))
