"""Fixtures shared by the GPU tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def no_tf32():
    """fp32 matmuls and convolutions in full fp32 for the test (tolerances assume it)."""
    saved = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved
