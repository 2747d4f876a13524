"""The GPU tools' one check: a tool that needs CUDA says so in one line on a machine without a GPU,
instead of failing deep inside torch or blaming its input."""

from __future__ import annotations

import sys

import torch


def cuda_missing(tool: str, alternative: str | None = None) -> bool:
    """True, after one line on stderr naming `tool` (and what to run instead), when this process
    sees no CUDA GPU."""
    if torch.cuda.is_available():
        return False
    instead = f" (or {alternative})" if alternative else ""
    print(f"{tool}: needs a CUDA GPU{instead}", file=sys.stderr)
    return True
