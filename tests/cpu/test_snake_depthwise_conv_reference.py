"""The snake_depthwise_conv op on the CPU: its reference is exactly the first two layers of an AudioVAE
residual unit (Snake1d, then the depthwise dilated causal conv), with out_alpha the first three (the
second Snake1d too), an out_alpha of 0 leaves the conv output as it is, the custom-op plumbing holds,
and arguments are validated with messages naming the tensor."""

from __future__ import annotations

import pytest
import torch

from voxcpm_triton import ops
from voxcpm_triton.audio.vae_layers import ResidualUnit, WeightNormConv


@pytest.mark.parametrize("dilation", (1, 3, 9))
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_reference_equals_the_residual_units_snake_and_conv(dilation, dtype):
    torch.manual_seed(dilation)
    unit = ResidualUnit(16, dilation, groups=16)
    for module in unit.modules():
        if isinstance(module, WeightNormConv):
            module.fold()  # as inference does: conv.weight is then the plain depthwise weight
    with torch.no_grad():
        unit.block[0].alpha.uniform_(0.2, 2.0)
        unit.block[1].bias.normal_()
    unit = unit.to(dtype)
    x = (torch.randn(3, 16, 100) * 2).to(dtype)
    snake, conv = unit.block[0], unit.block[1]
    with torch.no_grad():
        expected = conv(snake(x))
        actual = ops.snake_depthwise_conv(x, snake.alpha, conv.weight, conv.bias, dilation)
    assert torch.equal(actual, expected)


@pytest.mark.parametrize("dilation", (1, 9))
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_reference_with_out_alpha_equals_the_units_snake_conv_snake(dilation, dtype):
    torch.manual_seed(dilation + 1)
    unit = ResidualUnit(16, dilation, groups=16)
    for module in unit.modules():
        if isinstance(module, WeightNormConv):
            module.fold()
    with torch.no_grad():
        unit.block[0].alpha.uniform_(0.2, 2.0)
        unit.block[2].alpha.uniform_(0.2, 2.0)
        unit.block[1].bias.normal_()
    unit = unit.to(dtype)
    x = (torch.randn(2, 16, 90) * 2).to(dtype)
    snake, conv, second_snake = unit.block[0], unit.block[1], unit.block[2]
    with torch.no_grad():
        expected = second_snake(conv(snake(x)))
        actual = ops.snake_depthwise_conv(x, snake.alpha, conv.weight, conv.bias, dilation, second_snake.alpha)
        assert torch.equal(ops.snake_depthwise_conv_ref(x, snake.alpha, conv.weight, conv.bias, dilation,
                                                        second_snake.alpha.reshape(16)), expected)
    assert torch.equal(actual, expected)
    assert not torch.equal(actual, ops.snake_depthwise_conv(x, snake.alpha, conv.weight, conv.bias, dilation))


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16))
def test_zero_out_alpha_is_the_identity(dtype):
    # The residual unit's bias channel rides through the second Snake on alpha 0.
    x = (torch.randn(2, 6, 50) * 3).to(dtype)
    alpha, weight, bias = (torch.rand(6) + 0.5).to(dtype), torch.randn(6, 1, 7).to(dtype), torch.randn(6).to(dtype)
    plain = ops.snake_depthwise_conv(x, alpha, weight, bias, 3)
    out_alpha = torch.zeros(6, dtype=dtype)
    assert torch.equal(ops.snake_depthwise_conv(x, alpha, weight, bias, 3, out_alpha), plain)
    out_alpha[2] = 1.5  # only channel 2 changes
    mixed = ops.snake_depthwise_conv(x, alpha, weight, bias, 3, out_alpha)
    kept = [c for c in range(6) if c != 2]
    assert torch.equal(mixed[:, kept], plain[:, kept]) and not torch.equal(mixed[:, 2], plain[:, 2])


def test_without_bias_and_with_flat_alpha():
    x = torch.randn(2, 4, 30)
    alpha, weight = torch.rand(4) + 0.5, torch.randn(4, 1, 7)
    expected = ops.snake_depthwise_conv_ref(x, alpha, weight, torch.zeros(4), 2)
    assert torch.equal(ops.snake_depthwise_conv(x, alpha, weight, None, 2), expected)


def test_custom_op_schema_and_fake_tensor():
    x = torch.randn(2, 8, 40)
    args = (x, torch.rand(8) + 0.5, torch.randn(8, 1, 7), torch.randn(8), 3)
    torch.library.opcheck(torch.ops.voxcpm.snake_depthwise_conv, args,
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))
    torch.library.opcheck(torch.ops.voxcpm.snake_depthwise_conv, args + (torch.rand(8) + 0.5,),
                          test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


@pytest.mark.parametrize("change, message", [
    (dict(x=torch.zeros(8, 10)), "x must be a floating"),
    (dict(x=torch.zeros(2, 8, 0)), "C > 0 channels and T > 0"),
    (dict(x=torch.zeros(2, 10, 8).transpose(1, 2)), "x's last dimension must be contiguous"),
    (dict(dilation=0), r"dilation must be in \[1, 1024\]"),
    (dict(alpha=torch.ones(7)), r"alpha must have shape \[8\]"),
    (dict(weight=torch.ones(8, 1, 3)), r"weight must have shape \[8, 1, 7\]"),
    (dict(weight=torch.ones(8, 8, 7)), r"weight must have shape \[8, 1, 7\]"),
    (dict(bias=torch.ones(4)), r"bias must be None or of shape \[8\]"),
    (dict(bias=torch.ones(8, dtype=torch.float64)), "bias must be torch.float32"),
    (dict(out_alpha=torch.ones(1, 8)), r"out_alpha must have shape \[8\] or \[1, 8, 1\]"),
    (dict(out_alpha=torch.ones(8, dtype=torch.bfloat16)), "out_alpha must be torch.float32"),
])
def test_validation_names_the_bad_argument(change, message):
    args = dict(x=torch.zeros(2, 8, 10), alpha=torch.ones(8), weight=torch.ones(8, 1, 7), bias=torch.ones(8),
                dilation=1, out_alpha=None)
    args.update(change)
    with pytest.raises(ValueError, match=message):
        ops.snake_depthwise_conv(**args)
