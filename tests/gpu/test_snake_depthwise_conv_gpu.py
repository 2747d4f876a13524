"""The snake_depthwise_conv CUDA op against its reference (tolerances in
voxcpm_triton/ops/snake_depthwise_conv.py), without and with the second Snake (out_alpha), on the
residual units' shapes of the VoxCPM2 vocoder (trimmed windows) and odd ones (T shorter than the conv's
reach, T = 1, no bias, trimmed and channel-sliced views), in fp32 / bf16 / fp16, and captured in a CUDA
graph and replayed on new data. TF32 is off so the fp32 reference conv is exact fp32. The kernel aligns
its tiles and 16-byte accesses to each row's own phase, so views offset by 0..7 elements, lengths that
are not multiples of 8 (output rows at every phase) and rows computed alone must all give bit-identical
outputs. An out_alpha of 0 (the residual unit's bias channel) must leave the conv output's values exactly."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from voxcpm_triton import ops
from voxcpm_triton.ops import library

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
    pytest.mark.usefixtures("no_tf32"),
]

DEVICE = "cuda"
DTYPES = (torch.float32, torch.bfloat16, torch.float16)
UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}
# (B, C, T, dilation): each decoder block's residual units at their trimmed lengths, then odd cases.
CASES = [(1, 1024, 144, 1), (2, 512, 312, 3), (3, 256, 1115, 9), (2, 128, 2062, 1), (4, 64, 3964, 3),
         (2, 32, 7766, 9), (2, 5, 7, 9), (1, 3, 1, 1), (3, 8, 300, 27)]


@pytest.fixture(scope="module", autouse=True)
def kernels_loaded():
    if torch.cuda.is_available():
        assert library.library() is not None, f"kernels library not loaded ({library.library_status()}); " \
                                              "build it with build/build_kernels.sh"


def make(batch: int, channels: int, length: int, dtype: torch.dtype, seed: int, bias: bool = True,
         out_alpha: bool = False):
    """x, alpha, weight, bias and, with out_alpha, an out_alpha in [0.1, 2.1) (else None)."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, device=DEVICE) * scale).to(dtype)

    def positive(*shape):
        return (torch.rand(*shape, generator=g, device=DEVICE) * 2 + 0.1).to(dtype)

    return (rand(batch, channels, length, scale=2.0), positive(1, channels, 1), rand(channels, 1, 7, scale=0.4),
            rand(channels) if bias else None, positive(channels) if out_alpha else None)


def _conv(activation: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, dilation: int):
    return F.conv1d(F.pad(activation, (6 * dilation, 0)), weight, bias, 1, 0, dilation, activation.shape[1])


def _snake_operands(y: torch.Tensor, alpha: torch.Tensor) -> torch.Tensor:
    """|y| + sin(alpha y)^2 / alpha: the size of Snake's terms, which its roundings scale with."""
    return y.abs() + torch.sin(alpha * y) ** 2 / alpha


def check(out, x, alpha, weight, bias, dilation, out_alpha=None) -> None:
    assert out.shape == x.shape and out.dtype == x.dtype and out.is_contiguous()
    assert torch.isfinite(out).all()
    x32, a32, w32 = x.float(), alpha.float().reshape(-1, 1), weight.float()
    b32 = None if bias is None else bias.float()
    # Size of the summed terms, and of Snake's operands carried through the taps.
    terms = _conv(ops.snake_ref(x32, a32).abs(), w32.abs(), None if b32 is None else b32.abs(), dilation)
    operands = _conv(_snake_operands(x32, a32), w32.abs(), None, dilation)
    conv_error = 1e-5 * terms + 1e-6  # the fp32 conv's, against the exact fp32 reference
    y = ops.snake_depthwise_conv_ref(x32, a32, w32, b32, dilation)
    exact, error_bound = y, conv_error
    if out_alpha is not None:
        # The second Snake at most doubles y's error (its slope is in [0, 2]) and adds its own sine error.
        oa32 = out_alpha.float().reshape(-1, 1)
        exact = ops.snake_ref(y, oa32)
        error_bound = 2 * conv_error + 2e-6 / oa32 + 1e-6 * _snake_operands(y, oa32)
    if x.dtype == torch.float32:
        error = (out - exact).abs()
        assert (error <= error_bound).all(), f"max error {error.max().item():.3g}"
        return
    u = UNIT_ROUNDOFF[x.dtype]
    once = exact.to(x.dtype).float()
    error = (out.float() - once).abs()
    assert (error <= 2 * u * once.abs() + error_bound).all(), \
        f"max error against one rounding {error.max().item():.3g}"
    # The model's path rounds after every op; its conv output moves by up to conv_per_op from y.
    conv_per_op = 6 * u * operands + 3 * u * y.abs() + conv_error
    per_op = ops.snake_depthwise_conv_ref(x, alpha, weight, bias, dilation, out_alpha).float()
    if out_alpha is None:
        bound = conv_per_op + 2 * u * per_op.abs()
    else:
        y_per_op = ops.snake_depthwise_conv_ref(x, alpha, weight, bias, dilation).float()
        bound = (2 * u * once.abs() + error_bound + 2 * conv_per_op
                 + 6 * u * _snake_operands(y_per_op, oa32) + 2 * u * per_op.abs())
    error = (out.float() - per_op).abs()
    assert (error <= bound).all(), f"max error against the per-op reference {error.max().item():.3g}"


@pytest.mark.parametrize("with_out_alpha", (False, True), ids=("conv", "conv-snake"))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "B{}xC{}xT{}-d{}".format(*c))
def test_kernel_matches_reference(case, dtype, with_out_alpha):
    batch, channels, length, dilation = case
    x, alpha, weight, bias, out_alpha = make(batch, channels, length, dtype, seed=sum(case), bias=channels != 8,
                                             out_alpha=with_out_alpha)
    check(ops.snake_depthwise_conv(x, alpha, weight, bias, dilation, out_alpha), x, alpha, weight, bias, dilation,
          out_alpha)


@pytest.mark.parametrize("with_out_alpha", (False, True), ids=("conv", "conv-snake"))
@pytest.mark.parametrize("dtype", DTYPES)
def test_trimmed_and_channel_sliced_views(dtype, with_out_alpha):
    full, alpha, weight, bias, out_alpha = make(3, 48, 1200, dtype, seed=7, out_alpha=with_out_alpha)
    trimmed = full[..., -1031:]
    check(ops.snake_depthwise_conv(trimmed, alpha, weight, bias, 3, out_alpha), trimmed, alpha, weight, bias, 3,
          out_alpha)
    sliced = full[:, 8:24, 5:]
    parts = alpha[:, 8:24], weight[8:24], bias[8:24]
    sliced_out_alpha = None if out_alpha is None else out_alpha[8:24]
    check(ops.snake_depthwise_conv(sliced, *parts, 9, sliced_out_alpha), sliced, *parts, 9, sliced_out_alpha)


@pytest.mark.parametrize("with_out_alpha", (False, True), ids=("conv", "conv-snake"))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dilation", (1, 3, 9))
# Shorter than the halo (5, 50 < 54), a row of 512-output tiles (1029) and one of 1024-output tiles (3900).
@pytest.mark.parametrize("length", (5, 50, 1029, 3900))
def test_misaligned_views_give_the_contiguous_copys_output(dtype, dilation, length, with_out_alpha):
    full, alpha, weight, bias, out_alpha = make(2, 6, length + 8, dtype, seed=length + dilation,
                                                out_alpha=with_out_alpha)
    channel_out_alpha = None if out_alpha is None else out_alpha[3:4]
    for offset in range(8):
        view = full[..., offset:offset + length]
        out = ops.snake_depthwise_conv(view, alpha, weight, bias, dilation, out_alpha)
        check(out, view, alpha, weight, bias, dilation, out_alpha)
        assert torch.equal(out, ops.snake_depthwise_conv(view.contiguous(), alpha, weight, bias, dilation, out_alpha)), \
            offset
        alone = ops.snake_depthwise_conv(view[1:, 3:4], alpha[:, 3:4], weight[3:4], bias[3:4], dilation,
                                         channel_out_alpha)
        assert torch.equal(out[1:, 3:4], alone), offset


@pytest.mark.parametrize("dtype", DTYPES)
def test_zero_out_alpha_leaves_the_conv_output_exactly(dtype):
    # The residual unit's bias channel (conv output exactly 1, out_alpha 0) must reach its GEMM as 1.
    x, alpha, weight, bias, out_alpha = make(2, 40, 1115, dtype, seed=21, out_alpha=True)
    out_alpha[::3] = 0
    weight[6] = 0
    bias[6] = 1
    plain = ops.snake_depthwise_conv(x, alpha, weight, bias, 3)
    fused = ops.snake_depthwise_conv(x, alpha, weight, bias, 3, out_alpha)
    assert torch.equal(fused[:, ::3], plain[:, ::3])
    assert (fused[:, 6] == 1).all()
    kept = slice(1, None, 3)  # channels whose out_alpha stayed positive
    check(fused[:, kept].contiguous(), x[:, kept], alpha[:, kept], weight[kept], bias[kept], 3, out_alpha[kept])
    assert torch.equal(ops.snake_depthwise_conv(x, alpha, weight, bias, 3, torch.zeros_like(out_alpha)), plain)


@pytest.mark.parametrize("with_out_alpha", (False, True), ids=("conv", "conv-snake"))
def test_captured_in_a_cuda_graph_and_replayed_on_new_data(with_out_alpha):
    x, alpha, weight, bias, out_alpha = make(16, 64, 3964, torch.bfloat16, seed=11, out_alpha=with_out_alpha)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ops.snake_depthwise_conv(x, alpha, weight, bias, 9, out_alpha)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.snake_depthwise_conv(x, alpha, weight, bias, 9, out_alpha)
    fresh = make(16, 64, 3964, torch.bfloat16, seed=12)[0]
    x.copy_(fresh)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, ops.snake_depthwise_conv(fresh, alpha, weight, bias, 9, out_alpha))
