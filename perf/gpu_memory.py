"""Device memory in use, as nvidia-smi reports it (all processes: servers run in other processes)."""

from __future__ import annotations

import shutil
import subprocess
from typing import Optional


def parse_memory_used(nvidia_smi_output: str, gpu_index: int = 0) -> Optional[float]:
    """MiB used on one GPU from `--query-gpu=memory.used --format=csv,noheader,nounits` output."""
    lines = [line.strip() for line in nvidia_smi_output.splitlines() if line.strip()]
    if gpu_index >= len(lines):
        return None
    try:
        return float(lines[gpu_index])
    except ValueError:
        return None


def _query(field: str) -> Optional[str]:
    """nvidia-smi's csv for one --query-gpu field, one line per GPU; None where there is no
    nvidia-smi or it fails (CPU machines)."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        return subprocess.run(
            ["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return None


def gpu_memory_used_mib(gpu_index: int = 0) -> Optional[float]:
    """None where there is no nvidia-smi or it fails (CPU machines)."""
    out = _query("memory.used")
    return None if out is None else parse_memory_used(out, gpu_index)


def gpu_name(gpu_index: int = 0) -> str:
    """The GPU's name ("none" without one): which machine a figure came from, so that report.py
    compares runs of one kind of card only. From nvidia-smi, as the memory column, so that a sweep
    of a server never loads torch."""
    lines = [line.strip() for line in (_query("name") or "").splitlines() if line.strip()]
    return lines[gpu_index] if gpu_index < len(lines) else "none"
