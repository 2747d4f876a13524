"""The CUDA ops library builds with plain nvcc (no GPU needed) and exports the C ABI the ctypes
loader declares. The build is skipped where nvcc is absent; it compiles for sm_90 only to stay short."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from voxcpm_triton.ops import library

ROOT = Path(__file__).resolve().parents[2]
HEADER = ROOT / "kernels" / "voxcpm_kernels.h"


def header_functions() -> set[str]:
    return set(re.findall(r"VOXCPM_API\s+[\w\s\*]+?\b(voxcpm_\w+)\s*\(", HEADER.read_text()))


def test_loader_declares_exactly_the_header_functions_and_abi_version():
    assert header_functions() == set(library.EXPORTED_SYMBOLS)
    version = re.search(r"#define VOXCPM_KERNELS_ABI_VERSION (\d+)", HEADER.read_text())
    assert version is not None and int(version.group(1)) == library.ABI_VERSION


def find_nvcc() -> str | None:
    found = shutil.which("nvcc")
    cuda_nvcc = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc"
    if found is None and os.access(cuda_nvcc, os.X_OK):
        found = str(cuda_nvcc)
    return found


def test_build_script_exits_cleanly_without_nvcc(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "NVCC": "", "CUDA_HOME": str(tmp_path / "no-cuda"), "HOME": str(tmp_path)}
    if shutil.which("nvcc", path=env["PATH"]):
        pytest.skip("nvcc is in /usr/bin or /bin")
    result = subprocess.run(["bash", str(ROOT / "build" / "build_kernels.sh"), str(tmp_path / "lib")],
                            env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "nvcc not found" in result.stdout
    assert not (tmp_path / "lib" / library.LIBRARY_NAME).exists()


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_library_builds_and_exports_every_c_symbol(tmp_path):
    env = dict(os.environ, VOXCPM_CUDA_ARCHS="90", NVCC=find_nvcc())
    result = subprocess.run(["bash", str(ROOT / "build" / "build_kernels.sh"), str(tmp_path)], env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    so = tmp_path / library.LIBRARY_NAME
    assert so.is_file()
    symbols = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True, check=True)
    exported = {line.split()[-1] for line in symbols.stdout.splitlines() if " T " in line}
    assert set(library.EXPORTED_SYMBOLS) <= exported
    # Hidden visibility: nothing but the C ABI leaks out (no C++ or CUDA runtime symbols).
    assert {name for name in exported if name.startswith("voxcpm_")} == set(library.EXPORTED_SYMBOLS)
    assert not [name for name in exported if name.startswith("_Z")]


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc not installed")
def test_required_hopper_kernels_without_cutlass_stop_the_build(tmp_path):
    env = dict(os.environ, VOXCPM_CUDA_ARCHS="90", NVCC=find_nvcc(), VOXCPM_REQUIRE_SM90="1",
               VOXCPM_CUTLASS_INCLUDE=str(tmp_path / "no-cutlass"))
    result = subprocess.run(["bash", str(ROOT / "build" / "build_kernels.sh"), str(tmp_path / "lib")], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert "VOXCPM_REQUIRE_SM90=1" in result.stderr
    assert not (tmp_path / "lib" / library.LIBRARY_NAME).exists()
