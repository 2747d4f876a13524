"""model_settings.checkpoint_folder: the served checkpoint comes from VOXCPM_CHECKPOINT or the
'checkpoint' parameter, and a folder that is not a checkpoint is refused saying what is wrong."""

from pathlib import Path

import pytest

from voxcpm_triton.serving.model_settings import CHECKPOINT_ENV, checkpoint_folder


def test_a_missing_folder_and_a_folder_without_config_are_told_apart(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(CHECKPOINT_ENV, raising=False)
    with pytest.raises(ValueError, match=f"checkpoint folder {tmp_path / 'gone'} does not exist"):
        checkpoint_folder({"checkpoint": str(tmp_path / "gone")}, str(tmp_path))
    monkeypatch.setenv(CHECKPOINT_ENV, str(tmp_path))
    with pytest.raises(ValueError, match=f"checkpoint folder {tmp_path} has no config.json"):
        checkpoint_folder({"checkpoint": str(tmp_path / "gone")}, str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    assert checkpoint_folder({}, str(tmp_path)) == tmp_path.resolve()
