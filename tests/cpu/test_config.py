"""config.json parsing: architecture detection from fields, reference defaults, clear errors."""

from __future__ import annotations

import json

import pytest

from tests.cpu.tiny_reference import tiny_config_dict
from voxcpm_triton.config import ConfigError, load_config, parse_config


@pytest.mark.parametrize(
    "variant,architecture,sample_rate,samples_per_patch",
    [("voxcpm2", "voxcpm2", 48000, 4 * 1920), ("voxcpm1.5", "voxcpm", 44100, 4 * 1764),
     ("voxcpm0.5b", "voxcpm", 16000, 2 * 640)],
)
def test_detects_architecture_and_variant(variant, architecture, sample_rate, samples_per_patch):
    config = parse_config(tiny_config_dict(variant))
    assert (config.architecture, config.variant) == (architecture, variant)
    assert config.sample_rate == sample_rate
    assert config.samples_per_patch == samples_per_patch


def test_voxcpm2_derived_stacks():
    config = parse_config(tiny_config_dict("voxcpm2"))
    assert config.encode_sample_rate == 16000
    assert config.residual_lm.no_rope and config.residual_lm.vocab_size == 0
    assert config.residual_lm.num_hidden_layers == 1
    assert config.dit_lm.hidden_size == 48 and config.dit_lm.num_attention_heads == 4
    assert not config.lm.no_rope and config.lm.head_dim == 16
    assert config.cfm.inference_cfg_rate == 2.0


def test_voxcpm1_residual_lm_keeps_rope_even_if_flag_present():
    raw = tiny_config_dict("voxcpm1.5")
    raw["residual_lm_no_rope"] = True  # only VoxCPM2 reads this key
    assert not parse_config(raw).residual_lm.no_rope


@pytest.mark.parametrize(
    "architecture,patch_size,residual_layers,fsq_dim,max_length",
    [("voxcpm2", 4, 8, 512, 8192), ("voxcpm", 2, 6, 256, 4096)],
)
def test_reference_defaults_per_architecture(architecture, patch_size, residual_layers, fsq_dim, max_length):
    raw = tiny_config_dict("voxcpm2")
    raw["architecture"] = architecture
    for key in ("patch_size", "residual_lm_num_layers", "scalar_quantization_latent_dim", "max_length",
                "audio_vae_config"):
        del raw[key]
    raw["feat_dim"] = 64  # the default AudioVAE's latent width
    config = parse_config(raw)
    assert (config.patch_size, config.residual_lm_num_layers, config.scalar_quantization_latent_dim,
            config.max_length) == (patch_size, residual_layers, fsq_dim, max_length)


def test_muP_scales():
    config = parse_config(tiny_config_dict("voxcpm0.5b"))
    assert config.lm.use_mup
    assert config.lm.embed_scale == 12
    assert config.lm.residual_scale == pytest.approx(1.4 / 2 ** 0.5)
    plain = parse_config(tiny_config_dict("voxcpm2")).lm
    assert (plain.embed_scale, plain.residual_scale) == (1.0, 1.0)


def test_missing_key_is_named():
    raw = tiny_config_dict("voxcpm2")
    del raw["lm_config"]["rope_scaling"]["short_factor"]
    with pytest.raises(ConfigError, match="lm_config.rope_scaling.short_factor"):
        parse_config(raw)


@pytest.mark.parametrize(
    "mutate,message",
    [(lambda r: r.update(architecture="voxcpm3"), "architecture"),
     (lambda r: r.update(dtype="int8"), "dtype"),
     (lambda r: r["lm_config"].update(num_key_value_heads=3), "num_key_value_heads"),
     (lambda r: r["dit_config"].update(num_heads=3), "dit_config.num_heads"),
     (lambda r: r["encoder_config"].update(kv_channels=None), "encoder_config head size 12"),
     (lambda r: r.update(patch_size=0), "patch_size"),
     (lambda r: r["lm_config"]["rope_scaling"].update(long_factor=[1.0]), "long_factor"),
     (lambda r: r["dit_config"]["cfm_config"].update(solver="dopri5"), "solver"),
     (lambda r: r["lm_config"].update(use_mup="maybe"), "lm_config.use_mup' must be true or false"),
     (lambda r: r["lm_config"].update(vocab_size=5000.7), "lm_config.vocab_size' must be an integer"),
     (lambda r: r["lm_config"].update(kv_channels="x"), "lm_config.kv_channels' must be an integer"),
     (lambda r: r["lm_config"].update(kv_channels=0), "lm_config.kv_channels' must be a positive integer"),
     (lambda r: r["lm_config"].update(rope_scaling=[1, 2]), "lm_config.rope_scaling' must be a JSON object"),
     (lambda r: r.update(encoder_config=None), "'encoder_config' must be a JSON object"),
     (lambda r: r["dit_config"]["cfm_config"].update(sigma_min="x"), "cfm_config.sigma_min' must be a finite number"),
     (lambda r: r.update(audio_vae_config="x"), "'audio_vae_config' must be a JSON object")],
)
def test_bad_values_are_rejected(mutate, message):
    raw = tiny_config_dict("voxcpm2")
    mutate(raw)
    with pytest.raises(ConfigError, match=message):
        parse_config(raw)


def test_load_config_reads_folder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(tiny_config_dict("voxcpm1.5")))
    assert load_config(tmp_path).variant == "voxcpm1.5"
    with pytest.raises(ConfigError, match="no config.json"):
        load_config(tmp_path / "missing")


def test_values_read_as_the_reference_reads_them():
    raw = tiny_config_dict("voxcpm2")
    raw["lm_config"]["use_mup"] = "false"  # pydantic's lax booleans: a string "false" is False
    raw["dtype"] = "bf16"  # the reference's get_dtype aliases
    raw["lm_config"]["hidden_size"] = float(raw["lm_config"]["hidden_size"])  # lax ints: 64.0, "8"
    raw["lm_config"]["num_hidden_layers"] = str(raw["lm_config"]["num_hidden_layers"])
    config = parse_config(raw)
    assert not config.lm.use_mup and config.dtype == "bfloat16"
    assert config.lm == parse_config(tiny_config_dict("voxcpm2")).lm.derive(use_mup=False)
    # VoxCPM1.x's AudioVAE has no out_sample_rate: such a key does not change its output rate.
    raw = tiny_config_dict("voxcpm1.5")
    raw["audio_vae_config"]["out_sample_rate"] = 48000
    assert parse_config(raw).sample_rate == 44100
    # audio_vae_config is read once, the same way for the config's own figures and for the AudioVAE.
    raw = tiny_config_dict("voxcpm2")
    plain = parse_config(tiny_config_dict("voxcpm2"))
    raw["audio_vae_config"]["decoder_rates"] = [str(r) for r in plain.audio_vae["decoder_rates"]]
    raw["audio_vae_config"]["sample_rate"] = str(plain.encode_sample_rate)
    config = parse_config(raw)
    assert (config.samples_per_patch, config.encode_sample_rate) == (plain.samples_per_patch, plain.encode_sample_rate)


@pytest.mark.parametrize("change,message", [
    (dict(depthwise="maybe"), "audio_vae_config.depthwise' must be true or false"),
    (dict(encoder_rates="2588"), "encoder_rates='2588'; must be a non-empty list"),
    (dict(encoder_dim=0), "audio_vae_config.encoder_dim' must be a positive integer"),
])
def test_bad_audio_vae_values_are_rejected(change, message):
    from voxcpm_triton.audio.audio_vae import parse_audio_vae_spec
    with pytest.raises(ValueError, match=message):
        parse_audio_vae_spec(change, "voxcpm2")
