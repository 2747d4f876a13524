"""Fixtures of the server tier: a tiny checkpoint and one real tritonserver (CPU configs) serving
model_repository/ on free loopback ports for the whole session."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the client/ package lives at the repository root
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tritonserver_process import TritonServer, start_server  # noqa: E402


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """The tiny VoxCPM2 checkpoint with its stop head zeroed (both stop logits 0: never stop), so
    every stream runs exactly to its length limit (MAX_SECONDS or the runaway guard): streams are as
    long as a test asks, and a cancelled one would clearly outlive the test if it were not ended."""
    from safetensors.torch import load_file, save_file

    from voxcpm_triton.checkpoint.make import make_checkpoint

    folder = make_checkpoint(tmp_path_factory.mktemp("checkpoint") / "voxcpm2-tiny", "voxcpm2", size="tiny")
    weights = load_file(folder / "model.safetensors")
    weights["stop_head.weight"].zero_()
    save_file(weights, folder / "model.safetensors")
    return folder


@pytest.fixture(scope="session")
def triton_server(tiny_checkpoint, tmp_path_factory) -> TritonServer:
    workdir = tmp_path_factory.mktemp("tritonserver")
    server = start_server(REPO / "model_repository", workdir, {"VOXCPM_CHECKPOINT": str(tiny_checkpoint)})
    yield server
    server.stop()


def server_with_decoder_config(tiny_checkpoint: Path, folder: Path, old: str, new: str) -> Iterator[TritonServer]:
    """A second server, on a copy of model_repository/ whose ar_decoder CPU config has the line `old`
    (which must occur once) replaced by `new`; the committed repository is unchanged."""
    repository = folder / "model_repository"
    shutil.copytree(REPO / "model_repository", repository, ignore=shutil.ignore_patterns("__pycache__"))
    config = repository / "ar_decoder" / "configs" / "cpu.pbtxt"
    text = config.read_text()
    assert text.count(old) == 1, f"{config} no longer holds {old!r}"
    config.write_text(text.replace(old, new))
    server = start_server(repository, folder, {"VOXCPM_CHECKPOINT": str(tiny_checkpoint)})
    yield server
    server.stop()
