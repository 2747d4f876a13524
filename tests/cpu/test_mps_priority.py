"""model_settings.apply_mps_priority: the ar_decoder's CUDA MPS client priority from its setting."""

from __future__ import annotations

import os

import pytest

from voxcpm_triton.serving import model_settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    monkeypatch.delenv("CUDA_MPS_CLIENT_PRIORITY", raising=False)
    monkeypatch.delenv(model_settings.MPS_PRIORITY_ENV, raising=False)


def test_the_parameter_sets_the_drivers_variable_and_empty_leaves_it():
    model_settings.apply_mps_priority({"mps_priority": ""})
    assert "CUDA_MPS_CLIENT_PRIORITY" not in os.environ
    model_settings.apply_mps_priority({})
    assert "CUDA_MPS_CLIENT_PRIORITY" not in os.environ
    model_settings.apply_mps_priority({"mps_priority": "1"})
    assert os.environ["CUDA_MPS_CLIENT_PRIORITY"] == "1"


def test_the_environment_overrides_the_parameter(monkeypatch):
    monkeypatch.setenv(model_settings.MPS_PRIORITY_ENV, "0")
    model_settings.apply_mps_priority({"mps_priority": "1"})
    assert os.environ["CUDA_MPS_CLIENT_PRIORITY"] == "0"


@pytest.mark.parametrize("value", ["2", "low", "-1"])
def test_a_value_the_driver_does_not_know_is_refused(value):
    with pytest.raises(ValueError, match="mps_priority"):
        model_settings.apply_mps_priority({"mps_priority": value})
    assert "CUDA_MPS_CLIENT_PRIORITY" not in os.environ
