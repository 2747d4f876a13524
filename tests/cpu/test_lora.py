"""An official LoRA adapter merged at load (checkpoint.lora) generates what the reference generates
with the adapter on its layers, and an adapter that does not fit is refused by name."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from tests.cpu.engine_harness import make_request, reference_patches, run_to_completion
from tests.cpu.tiny_reference import build_reference_model, model_state, tiny_config_dict
from tests.lora_adapters import write_adapter
from tests.reference_shim import import_reference
from voxcpm_triton.checkpoint.lora import merge_lora, read_settings
from voxcpm_triton.checkpoint.tensor_files import CheckpointError
from voxcpm_triton.config import parse_config
from voxcpm_triton.engine.engine import Engine
from voxcpm_triton.model.voxcpm import build_model

TOLERANCE = 1e-4  # fp32 max abs error over all patches, as the engine parity tests


def _ours(raw: dict, state: dict[str, torch.Tensor]):
    model = build_model(parse_config(raw)).eval()
    model.load_state_dict(state, strict=True)
    return model


def _generate(model, seed: int = 3) -> np.ndarray:
    config = model.config
    gen = torch.Generator().manual_seed(7)
    text = torch.randint(110, config.lm.vocab_size, (7,), generator=gen)
    request = make_request(model, "r", text, min_len=12, max_len=12, timesteps=5, cfg_value=2.0, seed=seed)
    engine = Engine(model, max_slots=1, max_context=config.max_length, device="cpu", window_patches=4)
    return run_to_completion(engine, [request])["r"], request


@pytest.mark.reference
@pytest.mark.parametrize("variant", ["voxcpm2", "voxcpm1.5"])
def test_merged_adapter_generates_as_the_reference_with_it(tmp_path, variant):
    if import_reference() is None:
        pytest.skip("reference voxcpm package not installed")
    raw = tiny_config_dict(variant)
    settings = {"enable_lm": True, "enable_dit": True, "enable_proj": True, "r": 4, "alpha": 8}
    reference = build_reference_model(raw, seed=1, lora=settings)
    with torch.no_grad():  # trained-looking pairs: the reference initialises lora_B to zero
        for name, parameter in reference.named_parameters():
            if ".lora_" in name:
                parameter.copy_(torch.randn_like(parameter) * 0.2)
    pairs = {k: v for k, v in reference.state_dict().items() if ".lora_" in k}
    assert any(k.startswith("feat_decoder.estimator.") for k in pairs) and "lm_to_dit_proj.lora_A" in pairs
    full_settings = reference.lora_config.model_dump()
    folder = write_adapter(tmp_path / "adapter", pairs, full_settings)

    state = model_state(reference)
    base = _ours(raw, state)
    merged_state = dict(state)
    assert merge_lora(merged_state, folder, parse_config(raw).is_v2) == len(pairs) // 2
    ours = _ours(raw, merged_state)

    got, request = _generate(ours)
    expected = reference_patches(reference, request, 12, 12, 5, 2.0, 3)
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= TOLERANCE
    without, _ = _generate(base)
    assert np.abs(without - expected).max() > 100 * TOLERANCE, "the adapter must change the audio"


@pytest.fixture
def v2_state():
    raw = tiny_config_dict("voxcpm2")
    return {k: v.clone() for k, v in build_model(parse_config(raw)).state_dict().items()}


Q = "base_lm.layers.0.self_attn.q_proj"
DIT_V = "feat_decoder.estimator.decoder.layers.0.self_attn.v_proj"


def _pair(state: dict, layer: str, r: int) -> dict[str, torch.Tensor]:
    out_features, in_features = state[f"{layer}.weight"].shape
    return {f"{layer}.lora_A": torch.randn(r, in_features), f"{layer}.lora_B": torch.randn(out_features, r)}


def test_a_folder_without_config_takes_the_reference_defaults(tmp_path, v2_state):
    assert DIT_V + ".weight" in v2_state
    pairs = {**_pair(v2_state, Q, 8), **_pair(v2_state, DIT_V, 8)}
    before = {layer: v2_state[f"{layer}.weight"].clone() for layer in (Q, DIT_V)}
    assert merge_lora(v2_state, write_adapter(tmp_path, pairs, None), is_v2=True) == 2
    for layer in (Q, DIT_V):  # r 8, alpha 16: scaling 2
        expected = before[layer] + 2.0 * pairs[f"{layer}.lora_B"] @ pairs[f"{layer}.lora_A"]
        torch.testing.assert_close(v2_state[f"{layer}.weight"], expected)
    defaults = read_settings(tmp_path, is_v2=True)
    assert defaults.enable_lm and defaults.enable_dit and not defaults.enable_proj
    assert "fusion_concat_proj" in defaults.target_proj_modules
    assert "fusion_concat_proj" not in read_settings(tmp_path, is_v2=False).target_proj_modules


@pytest.mark.parametrize("pairs, settings, message", [
    (lambda s: _pair(s, DIT_V, 4), {"enable_lm": True, "r": 4}, "v_proj (no layer of this model that lora_config.json adapts)"),
    (lambda s: {f"{Q}.lora_A": _pair(s, Q, 4)[f"{Q}.lora_A"]}, {"enable_lm": True, "r": 4}, "only one of lora_A and lora_B"),
    (lambda s: _pair(s, Q, 4), {"enable_lm": True, "r": 8}, "at r=8"),
    (lambda s: {**_pair(s, Q, 4), "extra": torch.zeros(1)}, {"enable_lm": True, "r": 4}, "extra (not a lora_A / lora_B tensor)"),
    (lambda s: {k.replace("layers.0", "layers.9"): v for k, v in _pair(s, Q, 4).items()}, {"enable_lm": True, "r": 4},
     "layers.9.self_attn.q_proj (no layer"),
    (lambda s: _pair(s, Q, 4), {"enable_lm": True, "r": 4, "use_dora": True}, "fields this loader does not know: ['use_dora']"),
    (lambda s: _pair(s, Q, 4), {"enable_lm": True, "r": "4"}, "r must be a positive integer and alpha a number"),
    (lambda s: _pair(s, Q, 4), {"enable_lm": "false", "r": 4}, "enable_lm must be true or false, got 'false'"),
    (lambda s: _pair(s, Q, 4), {"enable_lm": True, "r": 4, "target_modules_lm": "xq_proj"},
     "target_modules_lm must be a list of module names, got 'xq_proj'"),
    (lambda s: {"base_lm.norm.lora_A": torch.randn(4, 8), "base_lm.norm.lora_B": torch.randn(8, 4)},
     {"enable_lm": True, "r": 4, "target_modules_lm": ["norm"]}, "base_lm.norm (its weight"),
    (lambda s: {k: v.to(torch.int8) for k, v in _pair(s, Q, 4).items()}, {"enable_lm": True, "r": 4},
     "lora_A torch.int8, lora_B torch.int8: not floating point"),
])
def test_an_adapter_that_does_not_fit_is_refused(tmp_path, v2_state, pairs, settings, message):
    with pytest.raises(CheckpointError, match=re.escape(message)):
        merge_lora(v2_state, write_adapter(tmp_path, pairs(v2_state), settings), is_v2=True)


def test_a_folder_without_weights_is_refused(tmp_path, v2_state):
    with pytest.raises(CheckpointError, match="LoRA weights: none of lora_weights.safetensors, lora_weights.ckpt"):
        merge_lora(v2_state, tmp_path, is_v2=True)


def test_the_decoder_setting_names_the_folder(tmp_path, monkeypatch):
    from voxcpm_triton.serving.model_settings import LORA_ENV, lora_folder

    repository = tmp_path / "model_repository"
    (repository / "ar_decoder").mkdir(parents=True)
    (repository / "adapters" / "alice").mkdir(parents=True)
    monkeypatch.delenv(LORA_ENV, raising=False)
    model_folder = str(repository / "ar_decoder")
    assert lora_folder({"lora": ""}, model_folder) is None and lora_folder({}, model_folder) is None
    assert lora_folder({"lora": "adapters/alice"}, model_folder) == (repository / "adapters" / "alice").resolve()
    with pytest.raises(ValueError, match="LoRA adapter folder .*adapters/bob .* does not exist"):
        lora_folder({"lora": "adapters/bob"}, model_folder)
    monkeypatch.setenv(LORA_ENV, "")
    assert lora_folder({"lora": "adapters/alice"}, model_folder) is None, "an empty VOXCPM_LORA turns it off"
    monkeypatch.setenv(LORA_ENV, str(tmp_path / "adapters-elsewhere"))
    with pytest.raises(ValueError, match="adapters-elsewhere"):
        lora_folder({"lora": "adapters/alice"}, model_folder)
