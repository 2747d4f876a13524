"""Generate random-weight checkpoints in the official folder layout.

    python -m voxcpm_triton.checkpoint.make --variant voxcpm2 --size tiny --out DIR

Layout (as released): config.json, model.safetensors (no audio_vae.* keys), audiovae.pth holding
{"state_dict": ...} (fp32, weight-norm pairs weight_g/weight_v), tokenizer.json,
tokenizer_config.json (LlamaTokenizerFast) and special_tokens_map.json.

"tiny" checkpoints (a few MB, fp32, seconds on CPU) are the test fixtures of all three variants,
and voxcpm2's is the default the server and the demo load; "full" is a VoxCPM2-shaped bf16 checkpoint (~2.3 B parameters) for GPU
benchmarks. Weights come from one seeded generator walked in sorted key order, so the same
arguments give byte-identical tensors. Scales are chosen so activations stay O(1) at any width:
no NaN/inf in bf16 and an audible (non-saturated, non-silent) decoder output.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from voxcpm_triton.audio.audio_vae import audio_vae_defaults, build_audio_vae
from voxcpm_triton.checkpoint.tiny_tokenizer import tiny_vocab_size, tokenizer_files
from voxcpm_triton.config import parse_config

VARIANTS = ("voxcpm2", "voxcpm1.5", "voxcpm0.5b")
SIZES = ("tiny", "full")
_VAE_GAIN = 0.5  # weight-norm gain of every VAE conv: keeps the tanh output out of saturation


def _lm_config(hidden: int, intermediate: int, heads: int, kv_heads: int, layers: int, head_dim: int,
               vocab_size: int, use_mup: bool) -> dict[str, Any]:
    half = head_dim // 2
    return {
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "max_position_embeddings": 32768,
        "num_attention_heads": heads,
        "num_hidden_layers": layers,
        "num_key_value_heads": kv_heads,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "rope_scaling": {
            "type": "longrope",
            "long_factor": [round(1.0 + 0.5 * i, 4) for i in range(half)],
            "short_factor": [round(1.0 + 0.05 * i, 4) for i in range(half)],
            "original_max_position_embeddings": 32768,
        },
        "vocab_size": vocab_size,
        "use_mup": use_mup,
        "scale_emb": 12,
        "dim_model_base": 256,
        "scale_depth": 1.4,
        "kv_channels": head_dim,
    }


def _cfm_config() -> dict[str, Any]:
    return {
        "sigma_min": 1e-6,
        "solver": "euler",
        "t_scheduler": "log-norm",
        "training_cfg_rate": 0.1,
        "inference_cfg_rate": 2.0,
        "reg_loss_type": "l1",
        "ratio_r_neq_t_range": [0.25, 0.75],
        "noise_cond_prob_range": [0.0, 0.0],
        "noise_cond_scale": 0.0,
    }


def _local(hidden: int, ffn: int, heads: int, layers: int, head_dim: int) -> dict[str, Any]:
    return {"hidden_dim": hidden, "ffn_dim": ffn, "num_heads": heads, "num_layers": layers, "kv_channels": head_dim}


def _audio_vae_config(variant: str, size: str) -> dict[str, Any]:
    if variant == "voxcpm2":
        vae = audio_vae_defaults("voxcpm2")
    else:
        vae = audio_vae_defaults("voxcpm")
        if variant == "voxcpm1.5":
            # 44.1 kHz; 1764 samples (40 ms) per latent frame.
            vae.update(encoder_rates=[2, 3, 6, 7, 7], decoder_rates=[7, 7, 6, 3, 2], sample_rate=44100)
    if size == "tiny":
        vae.update(encoder_dim=8, latent_dim=16, decoder_dim=2 ** (len(vae["decoder_rates"]) + 1))
    return vae


def config_dict(variant: str, size: str = "tiny") -> dict[str, Any]:
    """The config.json of a generated checkpoint: every key of the reference's config classes."""
    if variant not in VARIANTS:
        raise ValueError(f"variant={variant!r}; allowed: {VARIANTS}")
    if size not in SIZES:
        raise ValueError(f"size={size!r}; allowed: {SIZES}")
    if size == "full" and variant != "voxcpm2":
        raise ValueError("size='full' is made for variant 'voxcpm2' only")
    is_v2 = variant == "voxcpm2"
    if size == "full":
        lm = _lm_config(2048, 6144, 16, 2, 28, 128, 73448, use_mup=False)
        encoder, dit = _local(1024, 4096, 16, 12, 128), _local(1024, 4096, 16, 12, 128)
        residual_layers, fsq_dim, max_length = 8, 512, 8192
    else:
        vocab = 64 * math.ceil(tiny_vocab_size() / 64)
        lm = _lm_config(64, 128, 4, 2, 2, 16, vocab, use_mup=variant == "voxcpm0.5b")
        encoder, dit = _local(48, 96, 4, 1, 16), _local(48, 96, 4, 2, 16)
        residual_layers, fsq_dim, max_length = 1, 32, 512
    vae = _audio_vae_config(variant, size)
    dit["cfm_config"] = _cfm_config()
    config: dict[str, Any] = {}
    if is_v2:
        config["architecture"] = "voxcpm2"
        dit["dit_mean_mode"] = False
    elif variant == "voxcpm1.5":
        config["architecture"] = "voxcpm"
    # VoxCPM-0.5B's config carries no "architecture" key: detection must not need it.
    config.update({
        "lm_config": lm,
        "patch_size": 4 if variant != "voxcpm0.5b" else 2,
        "feat_dim": vae["latent_dim"],
        "residual_lm_num_layers": residual_layers,
        "scalar_quantization_latent_dim": fsq_dim,
        "scalar_quantization_scale": 9,
        "encoder_config": encoder,
        "dit_config": dit,
        "audio_vae_config": vae,
        "max_length": max_length,
        "device": "cpu" if size == "tiny" else "cuda",
        "dtype": "float32" if size == "tiny" else "bfloat16",
    })
    if is_v2:
        config["residual_lm_no_rope"] = True
    else:
        config["dit_mean_mode"] = False
    return config


def _random_tensor(name: str, shape: torch.Size, dtype: torch.dtype, generator: torch.Generator) -> torch.Tensor:
    noise = torch.randn(shape, generator=generator, dtype=dtype, device=generator.device)
    if len(shape) <= 1:
        return noise.mul_(0.1).add_(1.0) if name.endswith("norm.weight") else noise.mul_(0.1)
    return noise.mul_(1.0 / math.sqrt(math.prod(shape[1:])))


def random_model_state(config: dict[str, Any], dtype: torch.dtype, seed: int,
                       device: str = "cpu") -> dict[str, torch.Tensor]:
    """Seeded random weights for every model.safetensors key, drawn directly in `dtype` (on
    `device`: a GPU draws the 2.3 B full-size values in a second, a CPU takes about a minute)."""
    from voxcpm_triton.model.voxcpm import build_model

    with torch.device("meta"):
        shapes = {name: tensor.shape for name, tensor in build_model(parse_config(config)).state_dict().items()}
    generator = torch.Generator(device=device).manual_seed(seed)
    return {name: _random_tensor(name, shapes[name], dtype, generator).cpu() for name in sorted(shapes)}


def random_vae_state(config: dict[str, Any], seed: int) -> dict[str, torch.Tensor]:
    architecture = config.get("architecture", "voxcpm")
    template = build_audio_vae(config["audio_vae_config"], architecture).state_dict()
    generator = torch.Generator().manual_seed(seed + 1)
    state: dict[str, torch.Tensor] = {}
    for name in sorted(template):
        tensor = template[name]
        if not tensor.is_floating_point():
            state[name] = tensor.clone()  # sr_bin_boundaries
            continue
        noise = torch.randn(tensor.shape, generator=generator)
        if name.endswith("weight_g"):
            state[name] = torch.full(tensor.shape, _VAE_GAIN)
        elif name.endswith("weight_v"):
            state[name] = noise
        elif name.endswith("alpha"):
            state[name] = (1.0 + 0.1 * noise).abs()
        elif name.endswith("scale_embed.weight"):
            state[name] = 1.0 + 0.1 * noise
        else:
            state[name] = 0.1 * noise if "embed" in name else 0.01 * noise
    return state


def make_checkpoint(out_dir: str | Path, variant: str, size: str = "tiny", seed: int = 0,
                    dtype: torch.dtype | None = None) -> Path:
    """Write a random checkpoint folder; returns its path. dtype defaults to fp32 (tiny) / bf16 (full)."""
    config = config_dict(variant, size)
    dtype = dtype or (torch.float32 if size == "tiny" else torch.bfloat16)
    config["dtype"] = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}[dtype]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    # Tiny checkpoints are drawn on the CPU so they are identical on every machine; the full-size
    # one uses the GPU where there is one (same seed -> same weights on that kind of device).
    device = "cuda" if size == "full" and torch.cuda.is_available() else "cpu"
    save_file(random_model_state(copy.deepcopy(config), dtype, seed, device), str(out / "model.safetensors"),
              metadata={"format": "pt"})
    torch.save({"state_dict": random_vae_state(config, seed)}, out / "audiovae.pth")
    for name, text in tokenizer_files().items():
        (out / name).write_text(text, encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", choices=VARIANTS, default="voxcpm2")
    parser.add_argument("--size", choices=SIZES, default="tiny")
    parser.add_argument("--out", required=True, help="output folder (created if missing)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default=None,
                        help="weight dtype of model.safetensors (default: float32 tiny, bfloat16 full)")
    args = parser.parse_args(argv)
    dtype = getattr(torch, args.dtype) if args.dtype else None
    path = make_checkpoint(args.out, args.variant, args.size, args.seed, dtype)
    print(path)


if __name__ == "__main__":
    main()
