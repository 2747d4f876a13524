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


def gpu_memory_used_mib(gpu_index: int = 0) -> Optional[float]:
    """None where there is no nvidia-smi or it fails (CPU machines)."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    return parse_memory_used(out, gpu_index)
