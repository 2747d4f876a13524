"""build/wheel_xz.py: a wheel packed as an xz tarball and zipped back holds the same files, bytes
and modes, and pip installs it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("wheel_xz", ROOT / "build" / "wheel_xz.py")
wheel_xz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wheel_xz)

NAME = "tinypkg-1.0-py3-none-any.whl"
FILES = {
    "tinypkg/__init__.py": (b"VALUE = 42\n", 0o644),
    "tinypkg/data.bin": (bytes(range(256)) * 64, 0o644),
    "tinypkg/tool.sh": (b"#!/bin/sh\necho hi\n", 0o755),
    "tinypkg-1.0.dist-info/METADATA": (b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n", 0o644),
    "tinypkg-1.0.dist-info/WHEEL": (b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
                                    0o644),
    "tinypkg-1.0.dist-info/RECORD": (b"", 0o644),
}


def _write_wheel(folder: Path) -> Path:
    wheel = folder / NAME
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zipped:
        for name, (data, mode) in FILES.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o100000 | mode) << 16
            zipped.writestr(info, data)
    return wheel


def test_a_packed_wheel_comes_back_with_the_same_files_and_modes(tmp_path):
    packed = wheel_xz.pack(_write_wheel(tmp_path))
    assert packed.name == NAME + ".tar.xz" and not (tmp_path / NAME).exists()
    out = tmp_path / "out"
    out.mkdir()
    wheel = wheel_xz.unpack(packed, out)
    assert wheel == out / NAME
    with zipfile.ZipFile(wheel) as zipped:
        assert [info.filename for info in zipped.infolist()] == list(FILES)
        for info in zipped.infolist():
            data, mode = FILES[info.filename]
            assert zipped.read(info) == data
            assert (info.external_attr >> 16) & 0o777 == mode


def test_pip_installs_the_unpacked_wheel(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    wheel = wheel_xz.unpack(wheel_xz.pack(_write_wheel(tmp_path)), out)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(target),
                    str(wheel)], check=True)
    assert (target / "tinypkg" / "__init__.py").read_bytes() == FILES["tinypkg/__init__.py"][0]


def test_unpack_refuses_a_name_without_the_suffix(tmp_path):
    with pytest.raises(ValueError, match="tar.xz"):
        wheel_xz.unpack(tmp_path / NAME, tmp_path)
