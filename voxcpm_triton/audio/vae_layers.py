"""Building blocks of the AudioVAE: weight-normalised causal convolutions, Snake activation,
residual units and sample-rate conditioning.

Parameter names follow the official audiovae.pth (torch.nn.utils.weight_norm style: `weight_g`,
`weight_v`, `bias`) until `fold()` replaces the pair by one plain `weight` for inference.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from voxcpm_triton import ops
from voxcpm_triton.ops import library


class WeightNormConv(nn.Module):
    """Shared weight-norm bookkeeping: weight = g * v / ||v|| with the norm over all dims but 0."""

    def __init__(self, weight_shape: tuple[int, ...], bias_size: int | None) -> None:
        super().__init__()
        self.weight_v = nn.Parameter(torch.empty(weight_shape))
        self.weight_g = nn.Parameter(torch.ones((weight_shape[0],) + (1,) * (len(weight_shape) - 1)))
        self.bias = nn.Parameter(torch.zeros(bias_size)) if bias_size is not None else None
        nn.init.kaiming_uniform_(self.weight_v, a=5**0.5)

    @property
    def folded(self) -> bool:
        return "weight" in self._parameters

    def effective_weight(self) -> torch.Tensor:
        if self.folded:
            return self._parameters["weight"]
        v = self.weight_v
        norm = v.flatten(1).norm(dim=1).view(self.weight_g.shape)
        return v * (self.weight_g / norm)

    def fold(self) -> None:
        """Replace (weight_g, weight_v) by the weight they define; inference then skips the norm."""
        if self.folded:
            return
        with torch.no_grad():
            weight = self.effective_weight().detach().clone()
        del self.weight_v
        del self.weight_g
        self.weight = nn.Parameter(weight, requires_grad=False)


class CausalConv1d(WeightNormConv):
    """Conv1d that sees only the past: `left_pad` zeros before the input, none after."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        left_pad: int,
        stride: int = 1,
        dilation: int = 1,
        groups: int = 1,
        bias: bool = True,
    ) -> None:
        super().__init__((out_channels, in_channels // groups, kernel_size), out_channels if bias else None)
        self.left_pad = left_pad
        self.stride = stride
        self.dilation = dilation
        self.groups = groups
        self.kernel_size = kernel_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.left_pad:  # a zero pad would still copy the input
            x = F.pad(x, (self.left_pad, 0))
        return self.forward_unpadded(x)

    def forward_unpadded(self, x: torch.Tensor) -> torch.Tensor:
        """The conv without the causal zero padding: `left_pad` fewer outputs, each the same as the
        padded conv's output at that time when x already holds that much history."""
        return F.conv1d(x, self.effective_weight(), self.bias, self.stride, 0, self.dilation, self.groups)

    def forward_unpadded_mono(self, x: torch.Tensor) -> torch.Tensor:
        """forward_unpadded of a conv with one output channel (the decoder's last), [B, 1, T - pad],
        in float32: one batched GEMM gives every tap's channel sum [B, taps, T] and one strided
        reduction adds each output's taps, shifted by k * dilation, in float32. cuDNN's
        implicit-GEMM kernels waste their tiles on a single output channel."""
        weight = self.effective_weight()
        if weight.shape[0] != 1 or self.groups != 1 or self.stride != 1:
            raise ValueError("forward_unpadded_mono needs a conv with one output channel, groups=1, stride=1")
        taps = weight.shape[-1]
        per_tap = torch.bmm(weight[0].t().expand(x.shape[0], -1, -1), x)
        length = x.shape[-1] - (taps - 1) * self.dilation
        # Element (b, k, t) of this view is per_tap[b, k, t + k * dilation].
        shifted = per_tap.as_strided((x.shape[0], taps, length),
                                     (per_tap.stride(0), per_tap.stride(1) + self.dilation, 1))
        out = shifted.sum(dim=1, dtype=torch.float32)
        if self.bias is not None:
            out += self.bias.float()
        return out.unsqueeze(1)

    def add_pointwise(self, residual: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """residual + self(x) for a 1x1 conv, x and residual [B, C, T], as one batched GEMM: the bias
        goes into a fresh copy of the residual (one elementwise pass, which also leaves it
        contiguous even when `residual` is a trimmed view) and cuBLAS adds that copy in its
        epilogue (beta=1) in place. Against conv + bias add + residual add this saves two full
        passes over the activation and cuDNN's NCHW/NHWC transforms around its 1x1 kernels."""
        if self.kernel_size != 1 or self.groups != 1 or self.stride != 1 or self.left_pad:
            raise ValueError("add_pointwise needs a 1x1 conv (kernel_size=1, groups=1, stride=1, no padding)")
        weight = self.effective_weight()[..., 0]
        if self.bias is not None:
            out = residual + self.bias.view(-1, 1)
        else:
            out = residual.clone(memory_format=torch.contiguous_format)
        # The weight expanded over the batch has batch stride 0: cuBLAS reads the one matrix.
        return out.baddbmm_(weight.expand(x.shape[0], -1, -1), x)


class CausalConvTranspose1d(WeightNormConv):
    """Upsampling transposed conv (kernel 2*stride); the `right_trim` trailing samples that would
    depend on future frames are cut, so T frames give exactly T*stride samples.

    `fast_path` (off by default; WindowedVocoder turns it on in its CUDA decode copy) returns a
    contiguous tensor instead of a trimmed view, at no extra pass."""

    def __init__(self, in_channels: int, out_channels: int, stride: int, right_trim: int) -> None:
        # ConvTranspose1d weights are [in, out, kernel]; weight norm is still taken over dim 0.
        super().__init__((in_channels, out_channels, 2 * stride), out_channels)
        self.stride = stride
        self.right_trim = right_trim
        self.fast_path = False

    def forward_with_extra_channels(self, x: torch.Tensor, extra: int) -> torch.Tensor:
        """The trimmed output plus `extra` zero channels after the real ones, [B, out + extra, T*s],
        contiguous: the buffer DecoderBlock's fast path runs its residual units in."""
        y = F.conv_transpose1d(x, self.effective_weight(), None, self.stride)
        channels, length = y.shape[1], y.shape[-1] - self.right_trim
        buffer = y.new_empty(y.shape[0], channels + extra, length)
        kept = y[..., :length]
        if self.bias is not None:
            torch.add(kept, self.bias.view(-1, 1), out=buffer[:, :channels])
        else:
            buffer[:, :channels].copy_(kept)
        buffer[:, channels:].zero_()
        return buffer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fast_path and self.bias is not None:
            # cuDNN adds the bias in a pass of its own anyway: adding it to the kept samples only
            # writes them to a new contiguous tensor in that same pass, instead of handing the
            # next layers a trimmed view (strided rows defeat vectorised kernels and aligned GEMMs).
            y = F.conv_transpose1d(x, self.effective_weight(), None, self.stride)
            return torch.add(y[..., : y.shape[-1] - self.right_trim], self.bias.view(-1, 1))
        y = F.conv_transpose1d(x, self.effective_weight(), self.bias, self.stride)
        return y[..., : y.shape[-1] - self.right_trim] if self.right_trim > 0 else y


class Snake1d(nn.Module):
    """Snake activation x + sin^2(alpha x) / alpha with a learned per-channel alpha.

    `use_op` (off by default; WindowedVocoder turns it on in its CUDA decode copy) runs the fused
    `voxcpm::snake` CUDA op, one pass instead of ~6 elementwise kernels, on CUDA tensors when the
    kernels library is loaded; otherwise the PyTorch expression runs."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))
        self.use_op = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.use_op and library.kernel_ready(x):
            return ops.snake(x, self.alpha)
        return ops.snake_ref(x, self.alpha)


# Channels appended to the fast path's residual buffers: one that the depthwise conv's bias holds at 1
# (carrying the 1x1 conv's bias through its GEMM as one more input channel) and zeros, so the GEMM's
# inner dimension stays a multiple of 8 (16-byte rows of its weight operand).
BIAS_CHANNELS = 8


@dataclass(frozen=True)
class BiasChannelWeights:
    """A depthwise residual unit's weights over C + BIAS_CHANNELS channels (ResidualUnit.accumulate_)."""

    alpha: torch.Tensor  # [C + E] first Snake
    depthwise_weight: torch.Tensor  # [C + E, 1, 7], zero past C
    depthwise_bias: torch.Tensor  # [C + E]: 1 at channel C, 0 after it
    second_alpha: torch.Tensor  # [C + E]: 0 past C, where Snake is then the identity
    pointwise: torch.Tensor  # [C, C + E]: the 1x1 weight, its bias as column C, zeros after


class ResidualUnit(nn.Module):
    """Snake -> dilated causal conv (kernel 7) -> Snake -> 1x1 conv, plus the skip connection.

    `fast_path` (off by default; WindowedVocoder turns it on in its CUDA decode copy) runs the 1x1
    conv, its bias and the skip connection as one batched GEMM (CausalConv1d.add_pointwise), and
    `build_bias_channel()` prepares `accumulate_`, which also folds that bias into the GEMM."""

    def __init__(self, dim: int, dilation: int, groups: int) -> None:
        super().__init__()
        self.block = nn.Sequential(
            Snake1d(dim),
            CausalConv1d(dim, dim, kernel_size=7, left_pad=6 * dilation, dilation=dilation, groups=groups),
            Snake1d(dim),
            CausalConv1d(dim, dim, kernel_size=1, left_pad=0),
        )
        self.fast_path = False
        self.bias_channel: BiasChannelWeights | None = None

    def build_bias_channel(self) -> None:
        """Weights for `accumulate_` from the current ones (call it after the final `.to()`); left
        unset for a unit whose conv is not depthwise (v1 checkpoints without `depthwise`)."""
        snake, conv, second_snake, pointwise = self.block
        channels = snake.alpha.shape[1]
        if conv.groups != channels or conv.kernel_size != 7:
            self.bias_channel = None
            return
        with torch.no_grad():
            depthwise = conv.effective_weight()
            extra = depthwise.new_zeros(BIAS_CHANNELS)
            depthwise_bias = torch.cat([conv.bias if conv.bias is not None else depthwise.new_zeros(channels), extra])
            depthwise_bias[channels] = 1
            pointwise_bias = pointwise.bias if pointwise.bias is not None else depthwise.new_zeros(channels)
            self.bias_channel = BiasChannelWeights(
                alpha=torch.cat([snake.alpha.reshape(channels), extra]),
                depthwise_weight=torch.cat([depthwise, depthwise.new_zeros(BIAS_CHANNELS, 1, conv.kernel_size)]),
                depthwise_bias=depthwise_bias,
                second_alpha=torch.cat([second_snake.alpha.reshape(channels), extra]),
                pointwise=torch.cat([pointwise.effective_weight()[..., 0], pointwise_bias.view(-1, 1),
                                     depthwise.new_zeros(channels, BIAS_CHANNELS - 1)], dim=1).contiguous(),
            )

    def accumulate_(self, buffer: torch.Tensor) -> torch.Tensor:
        """Adds the unit's output into buffer[:, :C] in place; buffer [B, C + BIAS_CHANNELS, T] holds
        the unit's input in its first C channels and zeros after them (which stay zero). The extra
        channels ride through the depthwise conv (channel C leaves it as its bias, 1) and the
        second Snake (alpha 0: the identity), so the 1x1 GEMM takes its bias as one more input
        channel and its epilogue adds the skip connection: no elementwise pass of its own. With the
        CUDA ops both Snakes and the depthwise conv are one kernel (the conv output goes into the
        second Snake unrounded)."""
        weights = self.bias_channel
        if weights is None:
            raise RuntimeError("accumulate_ needs build_bias_channel() first (depthwise units only)")
        snake, conv, second_snake, _ = self.block
        args = (buffer, weights.alpha, weights.depthwise_weight, weights.depthwise_bias, conv.dilation)
        if snake.use_op and library.kernel_ready(buffer):
            if second_snake.use_op:
                h = ops.snake_depthwise_conv(*args, out_alpha=weights.second_alpha)
            else:
                h = ops.snake_ref(ops.snake_depthwise_conv(*args), weights.second_alpha)
        else:
            h = ops.snake_depthwise_conv_ref(*args, out_alpha=weights.second_alpha)
        channels = weights.pointwise.shape[0]
        buffer[:, :channels].baddbmm_(weights.pointwise.expand(buffer.shape[0], -1, -1), h)
        return buffer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        snake, conv, second_snake, pointwise = self.block
        if snake.use_op and library.kernel_ready(x) and conv.groups == x.shape[1] and conv.kernel_size == 7:
            # The first Snake, the causal padding, the depthwise conv and (with its op on) the second
            # Snake as one kernel: the activations and the padded copy never reach memory.
            out_alpha = second_snake.alpha if second_snake.use_op else None
            h = ops.snake_depthwise_conv(x, snake.alpha, conv.effective_weight(), conv.bias, conv.dilation, out_alpha)
            if out_alpha is None:
                h = second_snake(h)
        elif self.fast_path:
            h = second_snake(conv(snake(x)))
        else:
            return x + self.block(x)
        if self.fast_path:
            return pointwise.add_pointwise(x, h)
        return x + pointwise(h)


def residual_stack(dim: int, groups: int) -> list[nn.Module]:
    return [ResidualUnit(dim, dilation, groups) for dilation in (1, 3, 9)]


class EncoderBlock(nn.Module):
    """Three residual units then a strided causal conv that downsamples by `stride`, doubling width."""

    def __init__(self, input_dim: int, output_dim: int, stride: int, groups: int, left_pad: int) -> None:
        super().__init__()
        self.block = nn.Sequential(
            *residual_stack(input_dim, groups),
            Snake1d(input_dim),
            CausalConv1d(input_dim, output_dim, kernel_size=2 * stride, left_pad=left_pad, stride=stride),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(x)


class DecoderBlock(nn.Module):
    """Snake, causal transposed conv upsampling by `stride`, three residual units.

    `fast_path` (off by default; WindowedVocoder turns it on in its CUDA decode copy, after
    `build_bias_channel()` on the units) runs the units in place in one buffer with BIAS_CHANNELS
    extra channels (ResidualUnit.accumulate_) and returns a view of its first channels."""

    def __init__(self, input_dim: int, output_dim: int, stride: int, groups: int) -> None:
        super().__init__()
        self.input_channels = input_dim
        self.block = nn.Sequential(
            Snake1d(input_dim),
            CausalConvTranspose1d(input_dim, output_dim, stride, right_trim=stride),
            *residual_stack(output_dim, groups),
        )
        self.fast_path = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        snake, upsample, *units = self.block
        if self.fast_path and all(unit.bias_channel is not None for unit in units):
            buffer = upsample.forward_with_extra_channels(snake(x), BIAS_CHANNELS)
            for unit in units:
                unit.accumulate_(buffer)
            return buffer[:, : buffer.shape[1] - BIAS_CHANNELS]
        return self.block(x)


class SampleRateCondition(nn.Module):
    """VoxCPM2 decoder conditioning on the requested output rate's bucket, applied before a block.

    `fast_path` (off by default; WindowedVocoder turns it on in its CUDA decode copy) applies the
    scale and bias in one elementwise pass; `affine(bucket)` gives them for a fixed rate."""

    COND_TYPES = ("scale_bias", "scale_bias_init", "add", "concat")

    def __init__(self, dim: int, buckets: int, cond_type: str, cond_dim: int, out_layer: bool) -> None:
        super().__init__()
        if cond_type not in self.COND_TYPES:
            raise ValueError(f"audio_vae_config.cond_type={cond_type!r}; allowed: {self.COND_TYPES}")
        if cond_type == "concat" and not out_layer:
            raise ValueError("audio_vae_config.cond_type='concat' needs cond_out_layer=true")
        self.cond_type = cond_type
        self.fast_path = False
        out_in_dim = dim
        if cond_type in ("scale_bias", "scale_bias_init"):
            self.scale_embed = nn.Embedding(buckets, dim)
            self.bias_embed = nn.Embedding(buckets, dim)
            nn.init.ones_(self.scale_embed.weight)
            nn.init.zeros_(self.bias_embed.weight)
        elif cond_type == "add":
            self.cond_embed = nn.Embedding(buckets, dim)
        else:
            self.cond_embed = nn.Embedding(buckets, cond_dim)
            out_in_dim = dim + cond_dim
        self.out_layer = (
            nn.Sequential(Snake1d(out_in_dim), CausalConv1d(out_in_dim, dim, kernel_size=1, left_pad=0))
            if out_layer
            else None
        )

    def affine(self, bucket: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(scale, shift) [B, C, 1] of a scale_bias condition without an output layer, for which
        forward(x, bucket) is x * scale + shift; None for the other kinds."""
        if self.cond_type not in ("scale_bias", "scale_bias_init") or self.out_layer is not None:
            return None
        return self.scale_embed(bucket).unsqueeze(-1), self.bias_embed(bucket).unsqueeze(-1)

    def forward(self, x: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
        if self.cond_type in ("scale_bias", "scale_bias_init") and self.fast_path:
            # One pass (and a contiguous result from a trimmed view) instead of a multiply and an add.
            x = torch.addcmul(self.bias_embed(bucket).unsqueeze(-1), x, self.scale_embed(bucket).unsqueeze(-1))
        elif self.cond_type in ("scale_bias", "scale_bias_init"):
            x = x * self.scale_embed(bucket).unsqueeze(-1) + self.bias_embed(bucket).unsqueeze(-1)
        elif self.cond_type == "add":
            x = x + self.cond_embed(bucket).unsqueeze(-1)
        else:
            cond = self.cond_embed(bucket).unsqueeze(-1).expand(-1, -1, x.shape[-1])
            x = torch.cat([x, cond], dim=1)
        return self.out_layer(x) if self.out_layer is not None else x
