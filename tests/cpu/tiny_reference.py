"""Tiny configs for each architecture and the reference models built from them in memory.

Shared by the model-core parity tests: the reference module is built first (it owns the random
init), its state_dict is loaded into ours strictly, and both run on the same inputs.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from tests.reference_shim import import_reference

HEAD_DIM = 16

# Tiny matmuls gain nothing from intra-op threads, and on a shared 2-core machine spinning worker
# threads make these tests ~10x slower.
torch.set_num_threads(1)


def tiny_config_dict(variant: str) -> dict[str, Any]:
    """A config.json dictionary with the official keys, at test size."""
    lm = {
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "max_position_embeddings": 32768,
        "num_attention_heads": 4,
        "num_hidden_layers": 2,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_scaling": {
            "type": "longrope",
            "long_factor": [1.0 + 0.37 * i for i in range(HEAD_DIM // 2)],
            "short_factor": [1.0 + 0.11 * i for i in range(HEAD_DIM // 2)],
            "original_max_position_embeddings": 32768,
        },
        "vocab_size": 300,
        "use_mup": False,
        "scale_emb": 12,
        "dim_model_base": 256,
        "scale_depth": 1.4,
        "kv_channels": HEAD_DIM,
    }
    encoder = {"hidden_dim": 48, "ffn_dim": 96, "num_heads": 4, "num_layers": 1, "kv_channels": HEAD_DIM}
    dit = {"hidden_dim": 48, "ffn_dim": 96, "num_heads": 4, "num_layers": 2, "kv_channels": HEAD_DIM,
           "cfm_config": {"sigma_min": 1e-6, "solver": "euler", "t_scheduler": "log-norm",
                          "inference_cfg_rate": 2.0}}
    common = {"lm_config": lm, "feat_dim": 8, "scalar_quantization_scale": 9, "encoder_config": encoder,
              "max_length": 256, "device": "cpu", "dtype": "float32"}
    if variant == "voxcpm2":
        return {**common, "architecture": "voxcpm2", "patch_size": 4, "residual_lm_num_layers": 1,
                "residual_lm_no_rope": True, "scalar_quantization_latent_dim": 32,
                "dit_config": {**dit, "dit_mean_mode": False},
                "audio_vae_config": {"encoder_dim": 16, "encoder_rates": [2, 5, 8, 8], "latent_dim": 8,
                                     "decoder_dim": 32, "decoder_rates": [8, 6, 5, 2, 2, 2],
                                     "sample_rate": 16000, "out_sample_rate": 48000}}
    if variant == "voxcpm1.5":
        return {**common, "architecture": "voxcpm", "patch_size": 4, "residual_lm_num_layers": 1,
                "scalar_quantization_latent_dim": 32, "dit_config": dit,
                "audio_vae_config": {"encoder_dim": 16, "encoder_rates": [2, 3, 6, 7, 7], "latent_dim": 8,
                                     "decoder_dim": 32, "decoder_rates": [7, 7, 6, 3, 2],
                                     "sample_rate": 44100}}
    if variant == "voxcpm0.5b":
        cfg = {**common, "patch_size": 2, "residual_lm_num_layers": 1, "scalar_quantization_latent_dim": 32,
               "dit_config": dit,
               "audio_vae_config": {"encoder_dim": 16, "latent_dim": 8, "decoder_dim": 32, "sample_rate": 16000}}
        cfg["lm_config"] = {**lm, "use_mup": True}  # the muP path (embedding and depth scaling)
        return cfg
    raise ValueError(f"unknown variant {variant!r}")


def reference_lm_config(raw: dict[str, Any]):
    import_reference()
    from voxcpm.modules.minicpm4 import MiniCPM4Config

    return MiniCPM4Config.model_validate(copy.deepcopy(raw["lm_config"]))


class _NullVAE(torch.nn.Module):
    """Just the attributes the reference model constructors read from their AudioVAE."""

    def __init__(self, raw: dict[str, Any]):
        super().__init__()
        vae = raw.get("audio_vae_config", {})
        rates = vae.get("encoder_rates", [2, 5, 8, 8])
        self.chunk_size = int(torch.tensor(rates).prod())
        self.decode_chunk_size = int(torch.tensor(vae.get("decoder_rates", [8, 8, 5, 2])).prod())
        self.sample_rate = vae.get("sample_rate", 16000)
        self.out_sample_rate = vae.get("out_sample_rate", self.sample_rate)
        self.latent_dim = vae.get("latent_dim", 64)


class _NullTokenizer:
    vocab: dict[str, int] = {}


def build_reference_model(raw: dict[str, Any], seed: int = 0, lora: dict[str, Any] | None = None) -> torch.nn.Module:
    """The reference VoxCPM2Model / VoxCPMModel for a config dict, random init, float32, eval;
    `lora`: the fields of a LoRAConfig, whose layers it then carries (lora_B zero, as initialised)."""
    import_reference()
    torch.manual_seed(seed)
    if raw.get("architecture") == "voxcpm2":
        from voxcpm.model.voxcpm2 import LoRAConfig, VoxCPM2Model as Model, VoxCPMConfig
    else:
        from voxcpm.model.voxcpm import LoRAConfig, VoxCPMModel as Model, VoxCPMConfig
    config = VoxCPMConfig.model_validate(copy.deepcopy(raw))
    lora_config = None if lora is None else LoRAConfig(**lora)
    model = Model(config, _NullTokenizer(), _NullVAE(raw), lora_config=lora_config, device="cpu")
    # Default init leaves every RMSNorm weight at 1; perturb them so a mix-up of norms would show.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.add_(torch.randn_like(param) * 0.1)
    return model.eval()


def model_state(reference: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The base model's tensors as a checkpoint holds them: no AudioVAE, no LoRA pairs."""
    return {k: v for k, v in reference.state_dict().items() if not k.startswith("audio_vae.") and ".lora_" not in k}
