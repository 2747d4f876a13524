"""The snake_depthwise_conv CUDA op against its reference (tolerances in
voxcpm_triton/ops/snake_depthwise_conv.py) on the residual units' shapes of the VoxCPM2 vocoder (trimmed
windows) and odd ones (T shorter than the conv's reach, T = 1, no bias, trimmed and channel-sliced
views), in fp32 / bf16 / fp16, and captured in a CUDA graph and replayed on new data. TF32 is off so the
fp32 reference conv is exact fp32. The kernel aligns its tiles and 16-byte accesses to each row's own
phase, so views offset by 0..7 elements, lengths that are not multiples of 8 (output rows at every
phase) and rows computed alone must all give bit-identical outputs."""

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


def make(batch: int, channels: int, length: int, dtype: torch.dtype, seed: int, bias: bool = True):
    g = torch.Generator(device=DEVICE).manual_seed(seed)

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, device=DEVICE) * scale).to(dtype)

    alpha = (torch.rand(1, channels, 1, generator=g, device=DEVICE) * 2 + 0.1).to(dtype)
    return (rand(batch, channels, length, scale=2.0), alpha, rand(channels, 1, 7, scale=0.4),
            rand(channels) if bias else None)


def _conv(activation: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, dilation: int):
    return F.conv1d(F.pad(activation, (6 * dilation, 0)), weight, bias, 1, 0, dilation, activation.shape[1])


def check(out, x, alpha, weight, bias, dilation) -> None:
    assert out.shape == x.shape and out.dtype == x.dtype and out.is_contiguous()
    assert torch.isfinite(out).all()
    x32, a32, w32 = x.float(), alpha.float().reshape(-1, 1), weight.float()
    b32 = None if bias is None else bias.float()
    # Size of the summed terms, and of Snake's operands carried through the taps.
    terms = _conv(ops.snake_ref(x32, a32).abs(), w32.abs(), None if b32 is None else b32.abs(), dilation)
    operands = _conv(x32.abs() + torch.sin(a32 * x32) ** 2 / a32, w32.abs(), None, dilation)
    exact = ops.snake_depthwise_conv_ref(x32, a32, w32, b32, dilation)
    if x.dtype == torch.float32:
        error = (out - exact).abs()
        assert (error <= 1e-5 * terms + 1e-6).all(), f"max error {error.max().item():.3g}"
        return
    u = UNIT_ROUNDOFF[x.dtype]
    once = exact.to(x.dtype).float()
    error = (out.float() - once).abs()
    assert (error <= 2 * u * once.abs() + 1e-5 * terms + 1e-6).all(), \
        f"max error against one rounding {error.max().item():.3g}"
    per_op = ops.snake_depthwise_conv_ref(x, alpha, weight, bias, dilation).float()
    error = (out.float() - per_op).abs()
    assert (error <= 6 * u * operands + 2 * u * per_op.abs() + 1e-5 * terms + 1e-6).all(), \
        f"max error against the per-op reference {error.max().item():.3g}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=lambda c: "B{}xC{}xT{}-d{}".format(*c))
def test_kernel_matches_reference(case, dtype):
    batch, channels, length, dilation = case
    x, alpha, weight, bias = make(batch, channels, length, dtype, seed=sum(case), bias=channels != 8)
    check(ops.snake_depthwise_conv(x, alpha, weight, bias, dilation), x, alpha, weight, bias, dilation)


@pytest.mark.parametrize("dtype", DTYPES)
def test_trimmed_and_channel_sliced_views(dtype):
    full, alpha, weight, bias = make(3, 48, 1200, dtype, seed=7)
    trimmed = full[..., -1031:]
    check(ops.snake_depthwise_conv(trimmed, alpha, weight, bias, 3), trimmed, alpha, weight, bias, 3)
    sliced = full[:, 8:24, 5:]
    parts = alpha[:, 8:24], weight[8:24], bias[8:24]
    check(ops.snake_depthwise_conv(sliced, *parts, 9), sliced, *parts, 9)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("dilation", (1, 3, 9))
# Shorter than the halo (5, 50 < 54), a row of 512-output tiles (1029) and one of 1024-output tiles (3900).
@pytest.mark.parametrize("length", (5, 50, 1029, 3900))
def test_misaligned_views_give_the_contiguous_copys_output(dtype, dilation, length):
    full, alpha, weight, bias = make(2, 6, length + 8, dtype, seed=length + dilation)
    for offset in range(8):
        view = full[..., offset:offset + length]
        out = ops.snake_depthwise_conv(view, alpha, weight, bias, dilation)
        check(out, view, alpha, weight, bias, dilation)
        assert torch.equal(out, ops.snake_depthwise_conv(view.contiguous(), alpha, weight, bias, dilation)), offset
        alone = ops.snake_depthwise_conv(view[1:, 3:4], alpha[:, 3:4], weight[3:4], bias[3:4], dilation)
        assert torch.equal(out[1:, 3:4], alone), offset


def test_captured_in_a_cuda_graph_and_replayed_on_new_data():
    x, alpha, weight, bias = make(16, 64, 3964, torch.bfloat16, seed=11)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ops.snake_depthwise_conv(x, alpha, weight, bias, 9)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.snake_depthwise_conv(x, alpha, weight, bias, 9)
    fresh = make(16, 64, 3964, torch.bfloat16, seed=12)[0]
    x.copy_(fresh)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, ops.snake_depthwise_conv(fresh, alpha, weight, bias, 9))
