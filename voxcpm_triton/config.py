"""Model configuration parsed from a checkpoint's config.json.

Two architectures share one config shape: "voxcpm2" (VoxCPM2, says so in its "architecture" key) and
"voxcpm" (VoxCPM1.5 and VoxCPM-0.5B, which lack the key or say "voxcpm"). Defaults follow the
reference package's config classes for each architecture, so a config.json that omits a key means
what it means to the reference. The variant name is derived from fields, never from folder names.
"""

from __future__ import annotations

import copy
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

ARCHITECTURES = ("voxcpm2", "voxcpm")
DTYPES = ("float32", "bfloat16", "float16")
DTYPE_ALIASES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # the reference's get_dtype takes them

# Special text tokens the reference hard-codes (its config.json does not carry them).
AUDIO_START_TOKEN = 101
AUDIO_END_TOKEN = 102
REF_AUDIO_START_TOKEN = 103
REF_AUDIO_END_TOKEN = 104

# AudioVAE defaults of the reference (AudioVAEConfig for "voxcpm", AudioVAEConfigV2 for "voxcpm2"),
# used when config.json has no audio_vae_config or omits some of its keys.
AUDIO_VAE_DEFAULTS: dict[str, dict[str, Any]] = {
    "voxcpm": {
        "encoder_dim": 128,
        "encoder_rates": [2, 5, 8, 8],
        "latent_dim": 64,
        "decoder_dim": 1536,
        "decoder_rates": [8, 8, 5, 2],
        "depthwise": True,
        "sample_rate": 16000,
        "use_noise_block": False,
    },
    "voxcpm2": {
        "encoder_dim": 128,
        "encoder_rates": [2, 5, 8, 8],
        "latent_dim": 64,
        "decoder_dim": 2048,
        "decoder_rates": [8, 6, 5, 2, 2, 2],
        "depthwise": True,
        "sample_rate": 16000,
        "out_sample_rate": 48000,
        "use_noise_block": False,
        "sr_bin_boundaries": [20000, 30000, 40000],
        "cond_type": "scale_bias",
        "cond_dim": 128,
        "cond_out_layer": False,
    },
}

# Top-level defaults that differ between the two reference config classes.
_TOP_DEFAULTS: dict[str, dict[str, Any]] = {
    "voxcpm": {"patch_size": 2, "residual_lm_num_layers": 6, "scalar_quantization_latent_dim": 256,
               "max_length": 4096},
    "voxcpm2": {"patch_size": 4, "residual_lm_num_layers": 8, "scalar_quantization_latent_dim": 512,
                "max_length": 8192},
}


class ConfigError(ValueError):
    """config.json is missing a required key or holds a value out of range."""


def _require(section: dict[str, Any], key: str, where: str) -> Any:
    if key not in section:
        raise ConfigError(f"config.json: missing required key '{where}{key}'")
    return section[key]


def positive_int(value: Any, name: str) -> int:
    number = integer(value, name)
    if number <= 0:
        raise ConfigError(f"config.json: '{name}' must be a positive integer, got {value!r}")
    return number


# The reference reads config.json through pydantic, whose lax mode also takes these spellings.
_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


def boolean(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ConfigError(f"config.json: '{name}' must be true or false, got {value!r}")


def integer(value: Any, name: str) -> int:
    """An int as pydantic's lax mode takes one: also a float with no fraction or a decimal string."""
    if isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"config.json: '{name}' must be an integer, got {value!r}")
    return value


def number(value: Any, name: str) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"config.json: '{name}' must be a finite number, got {value!r}")
    return float(value)


def _section(raw: dict[str, Any], key: str, where: str, required: bool = True) -> dict[str, Any]:
    """A nested object of config.json ({} where it is optional and absent or null)."""
    value = _require(raw, key, where) if required else raw.get(key)
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"config.json: '{where}{key}' must be a JSON object, got {value!r}")
    return value


def _kv_channels(value: Any, name: str) -> int | None:
    return None if value is None else positive_int(value, name)


@dataclass(frozen=True)
class RopeScaling:
    """LongRoPE parameters: per-frequency divisors for short and long contexts."""

    type: str
    long_factor: tuple[float, ...]
    short_factor: tuple[float, ...]
    original_max_position_embeddings: int


@dataclass(frozen=True)
class LMConfig:
    """One MiniCPM-4 transformer stack (base LM, residual LM, LocEnc or LocDiT backbone)."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    rms_norm_eps: float
    rope_theta: float
    rope_scaling: RopeScaling
    max_position_embeddings: int
    use_mup: bool
    scale_emb: float
    dim_model_base: int
    scale_depth: float
    bos_token_id: int
    eos_token_id: int
    kv_channels: int | None = None
    no_rope: bool = False

    @property
    def head_dim(self) -> int:
        return self.kv_channels if self.kv_channels else self.hidden_size // self.num_attention_heads

    @property
    def residual_scale(self) -> float:
        """Multiplier of each sub-layer's output before the residual add (muP depth scaling)."""
        return self.scale_depth / math.sqrt(self.num_hidden_layers) if self.use_mup else 1.0

    @property
    def embed_scale(self) -> float:
        return self.scale_emb if self.use_mup else 1.0

    def derive(self, **changes: Any) -> "LMConfig":
        """A copy with some fields replaced (the reference derives LocEnc/LocDiT/residual LM this way)."""
        values = {name: getattr(self, name) for name in self.__dataclass_fields__}
        values.update(changes)
        return LMConfig(**values)


@dataclass(frozen=True)
class LocalStackConfig:
    """LocEnc or LocDiT sizes as written in encoder_config / dit_config."""

    hidden_dim: int
    ffn_dim: int
    num_heads: int
    num_layers: int
    kv_channels: int | None = None


@dataclass(frozen=True)
class CfmConfig:
    """Flow-matching settings as config.json holds them. Inference uses only `solver`, which must be
    "euler"; the CFG value comes with each request."""

    sigma_min: float = 1e-6
    solver: str = "euler"
    t_scheduler: str = "log-norm"
    training_cfg_rate: float = 0.1
    inference_cfg_rate: float = 1.0
    reg_loss_type: str = "l1"
    ratio_r_neq_t_range: tuple[float, float] = (0.25, 0.75)
    noise_cond_prob_range: tuple[float, float] = (0.0, 0.0)
    noise_cond_scale: float = 0.0


@dataclass(frozen=True)
class ModelConfig:
    architecture: str
    variant: str
    lm: LMConfig
    patch_size: int
    feat_dim: int
    residual_lm_num_layers: int
    residual_lm_no_rope: bool
    scalar_quantization_latent_dim: int
    scalar_quantization_scale: int
    encoder: LocalStackConfig
    dit: LocalStackConfig
    dit_mean_mode: bool
    cfm: CfmConfig
    audio_vae: dict[str, Any]
    max_length: int
    dtype: str
    audio_start_token: int = AUDIO_START_TOKEN
    audio_end_token: int = AUDIO_END_TOKEN
    ref_audio_start_token: int = REF_AUDIO_START_TOKEN
    ref_audio_end_token: int = REF_AUDIO_END_TOKEN

    @property
    def is_v2(self) -> bool:
        return self.architecture == "voxcpm2"

    @property
    def sample_rate(self) -> int:
        """Sample rate of the decoded (output) audio."""
        return self.audio_vae["out_sample_rate"]

    @property
    def encode_sample_rate(self) -> int:
        """Sample rate the AudioVAE encoder expects for prompt audio."""
        return self.audio_vae["sample_rate"]

    @property
    def samples_per_patch(self) -> int:
        """Output samples per latent patch (the decoder's upsampling times the patch size)."""
        return self.patch_size * math.prod(self.audio_vae["decoder_rates"])

    @property
    def residual_lm(self) -> LMConfig:
        no_rope = self.residual_lm_no_rope if self.is_v2 else self.lm.no_rope
        return self.lm.derive(num_hidden_layers=self.residual_lm_num_layers, vocab_size=0, no_rope=no_rope)

    @property
    def encoder_lm(self) -> LMConfig:
        return self._local_lm(self.encoder)

    @property
    def dit_lm(self) -> LMConfig:
        return self._local_lm(self.dit)

    def _local_lm(self, sizes: LocalStackConfig) -> LMConfig:
        return self.lm.derive(
            hidden_size=sizes.hidden_dim,
            intermediate_size=sizes.ffn_dim,
            num_attention_heads=sizes.num_heads,
            num_hidden_layers=sizes.num_layers,
            kv_channels=sizes.kv_channels,
            vocab_size=0,
        )


def parse_audio_vae(section: Mapping[str, Any] | None, architecture: str) -> dict[str, Any]:
    """audio_vae_config over the architecture's defaults, each value the AudioVAE reads taken as
    the reference's pydantic class takes it or refused by name: a null latent_dim derived from the
    encoder, and out_sample_rate the rate the decoder outputs (VoxCPM1.x's config class has no
    out_sample_rate, and a key of that name means nothing to it: its AudioVAE decodes at the rate it
    encodes). use_noise_block is kept as given, for the AudioVAE to refuse."""
    merged = {**copy.deepcopy(AUDIO_VAE_DEFAULTS[architecture]), **(section or {})}
    where = "audio_vae_config."
    typed = dict(merged)
    for key in ("encoder_dim", "decoder_dim", "sample_rate"):
        typed[key] = positive_int(merged[key], where + key)
    for key in ("encoder_rates", "decoder_rates"):
        values = merged[key]
        if not isinstance(values, (list, tuple)) or not values:
            raise ConfigError(f"{where}{key}={values!r}; must be a non-empty list of positive ints")
        typed[key] = tuple(positive_int(r, where + key) for r in values)
    latent_dim = merged["latent_dim"]
    if latent_dim is None:
        latent_dim = typed["encoder_dim"] * 2 ** len(typed["encoder_rates"])
    typed["latent_dim"] = positive_int(latent_dim, where + "latent_dim")
    typed["depthwise"] = boolean(merged["depthwise"], where + "depthwise")
    is_v2 = architecture == "voxcpm2"
    typed["out_sample_rate"] = positive_int(merged.get("out_sample_rate", merged["sample_rate"]) if is_v2
                                            else merged["sample_rate"], where + "out_sample_rate")
    boundaries = merged.get("sr_bin_boundaries") if is_v2 else None
    if boundaries is not None and not isinstance(boundaries, (list, tuple)):
        raise ConfigError(f"{where}sr_bin_boundaries={boundaries!r}; must be a list of ints")
    typed["sr_bin_boundaries"] = (tuple(integer(b, where + "sr_bin_boundaries") for b in boundaries)
                                  if boundaries is not None else None)
    typed["cond_type"] = str(merged.get("cond_type", "scale_bias"))
    typed["cond_dim"] = positive_int(merged.get("cond_dim", 128), where + "cond_dim")
    typed["cond_out_layer"] = boolean(merged.get("cond_out_layer", False), where + "cond_out_layer")
    return typed


def detect_architecture(raw: dict[str, Any]) -> str:
    arch = str(raw.get("architecture", "voxcpm")).lower()
    if arch not in ARCHITECTURES:
        raise ConfigError(f"config.json: 'architecture' must be one of {ARCHITECTURES}, got {arch!r}")
    return arch


def _variant(architecture: str, patch_size: int, sample_rate: int) -> str:
    if architecture == "voxcpm2":
        return "voxcpm2"
    # VoxCPM-0.5B: 2-frame patches decoded at 16 kHz; VoxCPM1.5: 4-frame patches at 44.1 kHz.
    return "voxcpm0.5b" if patch_size == 2 and sample_rate == 16000 else "voxcpm1.5"


def _numbers(values: Any, name: str) -> tuple[float, ...]:
    if not isinstance(values, list):
        raise ConfigError(f"config.json: '{name}' must be a list of numbers, got {values!r}")
    return tuple(number(x, name) for x in values)


def _parse_lm(raw: dict[str, Any]) -> LMConfig:
    where = "lm_config."
    rope = _section(raw, "rope_scaling", where)
    rope_where = where + "rope_scaling."
    factors = {name: _numbers(_require(rope, name, rope_where), rope_where + name)
               for name in ("long_factor", "short_factor")}
    rope_scaling = RopeScaling(
        type=str(_require(rope, "type", rope_where)),
        long_factor=factors["long_factor"],
        short_factor=factors["short_factor"],
        original_max_position_embeddings=positive_int(
            _require(rope, "original_max_position_embeddings", rope_where),
            rope_where + "original_max_position_embeddings",
        ),
    )
    lm = LMConfig(
        hidden_size=positive_int(_require(raw, "hidden_size", where), where + "hidden_size"),
        intermediate_size=positive_int(_require(raw, "intermediate_size", where), where + "intermediate_size"),
        num_hidden_layers=positive_int(_require(raw, "num_hidden_layers", where), where + "num_hidden_layers"),
        num_attention_heads=positive_int(_require(raw, "num_attention_heads", where),
                                          where + "num_attention_heads"),
        num_key_value_heads=positive_int(_require(raw, "num_key_value_heads", where),
                                          where + "num_key_value_heads"),
        vocab_size=integer(_require(raw, "vocab_size", where), where + "vocab_size"),
        rms_norm_eps=number(_require(raw, "rms_norm_eps", where), where + "rms_norm_eps"),
        rope_theta=number(_require(raw, "rope_theta", where), where + "rope_theta"),
        rope_scaling=rope_scaling,
        max_position_embeddings=positive_int(_require(raw, "max_position_embeddings", where),
                                              where + "max_position_embeddings"),
        use_mup=boolean(raw.get("use_mup", True), where + "use_mup"),
        scale_emb=number(_require(raw, "scale_emb", where), where + "scale_emb"),
        dim_model_base=integer(_require(raw, "dim_model_base", where), where + "dim_model_base"),
        scale_depth=number(_require(raw, "scale_depth", where), where + "scale_depth"),
        bos_token_id=integer(_require(raw, "bos_token_id", where), where + "bos_token_id"),
        eos_token_id=integer(_require(raw, "eos_token_id", where), where + "eos_token_id"),
        kv_channels=_kv_channels(raw.get("kv_channels"), where + "kv_channels"),
        no_rope=boolean(raw.get("no_rope", False), where + "no_rope"),
    )
    if lm.num_attention_heads % lm.num_key_value_heads:
        raise ConfigError(
            f"config.json: lm_config.num_attention_heads ({lm.num_attention_heads}) must be a multiple of "
            f"num_key_value_heads ({lm.num_key_value_heads})"
        )
    if len(rope_scaling.short_factor) != lm.head_dim // 2 or len(rope_scaling.long_factor) != lm.head_dim // 2:
        raise ConfigError(
            f"config.json: lm_config.rope_scaling short_factor/long_factor need head_dim/2 = {lm.head_dim // 2} "
            f"entries, got {len(rope_scaling.short_factor)}/{len(rope_scaling.long_factor)}"
        )
    return lm


def _parse_local(raw: dict[str, Any], where: str) -> LocalStackConfig:
    defaults = LocalStackConfig(hidden_dim=1024, ffn_dim=4096, num_heads=16, num_layers=4)
    return LocalStackConfig(
        hidden_dim=positive_int(raw.get("hidden_dim", defaults.hidden_dim), where + "hidden_dim"),
        ffn_dim=positive_int(raw.get("ffn_dim", defaults.ffn_dim), where + "ffn_dim"),
        num_heads=positive_int(raw.get("num_heads", defaults.num_heads), where + "num_heads"),
        num_layers=positive_int(raw.get("num_layers", defaults.num_layers), where + "num_layers"),
        kv_channels=_kv_channels(raw.get("kv_channels"), where + "kv_channels"),
    )


def _parse_cfm(raw: dict[str, Any]) -> CfmConfig:
    known = {name: raw[name] for name in CfmConfig.__dataclass_fields__ if name in raw}
    where = "dit_config.cfm_config."
    for name in ("ratio_r_neq_t_range", "noise_cond_prob_range"):
        if name in known:
            known[name] = _numbers(known[name], where + name)
    for name in ("sigma_min", "training_cfg_rate", "inference_cfg_rate", "noise_cond_scale"):
        if name in known:
            known[name] = number(known[name], where + name)
    cfm = CfmConfig(**known)
    if cfm.solver != "euler":
        raise ConfigError(f"config.json: dit_config.cfm_config.solver must be 'euler', got {cfm.solver!r}")
    return cfm


def parse_config(raw: dict[str, Any]) -> ModelConfig:
    """Build a ModelConfig from the parsed config.json dictionary."""
    if not isinstance(raw, dict):
        raise ConfigError(f"config.json must hold a JSON object, got {type(raw).__name__}")
    arch = detect_architecture(raw)
    top = {**_TOP_DEFAULTS[arch], **{k: raw[k] for k in _TOP_DEFAULTS[arch] if k in raw}}
    lm = _parse_lm(_section(raw, "lm_config", ""))
    dit_raw = _section(raw, "dit_config", "")
    cfm_raw = _section(dit_raw, "cfm_config", "dit_config.")
    # VoxCPM2 keeps the mean-mode switch inside dit_config, VoxCPM1.x at the top level.
    mean_mode = boolean(dit_raw.get("dit_mean_mode", False) if arch == "voxcpm2" else raw.get("dit_mean_mode", False),
                      "dit_mean_mode")
    audio_vae = parse_audio_vae(_section(raw, "audio_vae_config", "", required=False), arch)
    dtype = str(raw.get("dtype", "bfloat16"))
    dtype = DTYPE_ALIASES.get(dtype, dtype)
    if dtype not in DTYPES:
        raise ConfigError(f"config.json: 'dtype' must be one of {DTYPES}, got {dtype!r}")
    patch_size = positive_int(top["patch_size"], "patch_size")
    feat_dim = positive_int(raw.get("feat_dim", 64), "feat_dim")
    if audio_vae["latent_dim"] != feat_dim:
        raise ConfigError(
            f"config.json: audio_vae_config.latent_dim ({audio_vae['latent_dim']}) must equal feat_dim ({feat_dim})"
        )
    sample_rate = audio_vae["out_sample_rate"]
    config = ModelConfig(
        architecture=arch,
        variant=_variant(arch, patch_size, sample_rate),
        lm=lm,
        patch_size=patch_size,
        feat_dim=feat_dim,
        residual_lm_num_layers=positive_int(top["residual_lm_num_layers"], "residual_lm_num_layers"),
        residual_lm_no_rope=boolean(raw.get("residual_lm_no_rope", False), "residual_lm_no_rope"),
        scalar_quantization_latent_dim=positive_int(top["scalar_quantization_latent_dim"],
                                                     "scalar_quantization_latent_dim"),
        scalar_quantization_scale=positive_int(raw.get("scalar_quantization_scale", 9), "scalar_quantization_scale"),
        encoder=_parse_local(_section(raw, "encoder_config", ""), "encoder_config."),
        dit=_parse_local(dit_raw, "dit_config."),
        dit_mean_mode=mean_mode,
        cfm=_parse_cfm(cfm_raw),
        audio_vae=audio_vae,
        max_length=positive_int(top["max_length"], "max_length"),
        dtype=dtype,
    )
    for name, stack in (("encoder_config", config.encoder_lm), ("dit_config", config.dit_lm)):
        if stack.num_attention_heads % lm.num_key_value_heads:
            raise ConfigError(
                f"config.json: {name}.num_heads ({stack.num_attention_heads}) must be a multiple of "
                f"lm_config.num_key_value_heads ({lm.num_key_value_heads}), which LocEnc/LocDiT inherit"
            )
        # LocEnc/LocDiT inherit the LM's LongRoPE factors, one per rotary frequency of their heads.
        if len(lm.rope_scaling.short_factor) != stack.head_dim // 2:
            raise ConfigError(
                f"config.json: {name} head size {stack.head_dim} (kv_channels, or hidden_dim/num_heads) needs "
                f"{stack.head_dim // 2} LongRoPE factors, lm_config.rope_scaling has {len(lm.rope_scaling.short_factor)}"
            )
    if config.lm.vocab_size <= max(REF_AUDIO_END_TOKEN, AUDIO_START_TOKEN):
        raise ConfigError(
            f"config.json: lm_config.vocab_size ({config.lm.vocab_size}) must exceed the special token ids "
            f"({AUDIO_START_TOKEN}-{REF_AUDIO_END_TOKEN})"
        )
    return config


def load_config(folder: str | Path) -> ModelConfig:
    """Read and parse `<folder>/config.json`."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        raise ConfigError(f"no config.json in checkpoint folder {str(folder)!r}")
    with path.open("r", encoding="utf-8") as handle:
        try:
            raw = json.load(handle)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc})") from exc
    return parse_config(raw)
