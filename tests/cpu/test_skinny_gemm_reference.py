"""The skinny_gemm op's reference (the CPU path) and its routing wrappers on the CPU."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from voxcpm_triton import ops
from voxcpm_triton.ops import skinny_linear as sg


def operands(m: int, k: int, n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(m, k, generator=g), torch.randn(n, k, generator=g) / k ** 0.5


def test_reference_is_the_linear_layer_and_swiglu_of_it():
    x, weight = operands(22, 64, 96)
    assert torch.equal(ops.skinny_gemm_ref(x, weight, sg.PLAIN), F.linear(x, weight))
    gate, up = F.linear(x, weight).chunk(2, dim=-1)
    torch.testing.assert_close(ops.skinny_gemm_ref(x, weight, sg.SWIGLU), F.silu(gate) * up, atol=0, rtol=0)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_wrappers_on_cpu_equal_what_they_replace(dtype):
    x, weight = operands(40, 64, 128, seed=1)  # beyond the kernel's 32 rows: the fallback
    x, weight = x.to(dtype).view(4, 10, 64), weight.to(dtype)
    assert torch.equal(ops.linear(x, weight), F.linear(x, weight))
    assert torch.equal(ops.gate_up_swiglu(x, weight), ops.swiglu(F.linear(x, weight)))
    small = x[:1, :3].contiguous()
    assert torch.equal(ops.skinny_gemm(small.view(3, 64), weight), F.linear(small.view(3, 64), weight))


def test_arguments_are_validated():
    x, weight = operands(4, 64, 64)
    with pytest.raises(ValueError, match="rows"):
        ops.skinny_gemm(torch.zeros(33, 64), weight)
    with pytest.raises(ValueError, match="out_features"):
        ops.linear(x, torch.zeros(64, 32))
    with pytest.raises(ValueError, match="epilogue"):
        ops.skinny_gemm(x, weight, 2)
    with pytest.raises(ValueError, match="even number of rows"):
        ops.gate_up_swiglu(x, torch.zeros(63, 64))
