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
     (lambda r: r["dit_config"]["cfm_config"].update(solver="dopri5"), "solver")],
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
