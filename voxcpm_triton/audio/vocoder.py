"""Stateless windowed decode of latent patches to PCM.

The AudioVAE decoder is causal with a finite receptive field, so the samples of one new patch are
fully determined by that patch and `context_frames` latent frames before it. Decoding a window of
(left context + new patch) and keeping the new patch's samples therefore reproduces the offline
decode exactly, while holding no per-stream state: Triton's dynamic batcher can hand any mix of
streams to one `decode` call. At a stream's start the window is shorter (fewer patches exist); the
decoder's zero padding then plays the role of the missing past, exactly as in the offline decode.
"""

from __future__ import annotations

import copy
import math
import os
import threading
from typing import Sequence

import numpy as np
import torch
from torch import nn

from voxcpm_triton.audio.audio_vae import AudioVAE
from voxcpm_triton.audio.chunks import DEFAULT_MAX_NEW, window_shapes
from voxcpm_triton.audio.vocoder_graphs import DecodeGraphs
from voxcpm_triton.audio.vae_layers import (
    CausalConv1d,
    CausalConvTranspose1d,
    DecoderBlock,
    ResidualUnit,
    SampleRateCondition,
    Snake1d,
)
from voxcpm_triton.model.fast_path import custom_ops_requested


def _context_through(module: nn.Module, context: int) -> int:
    """Samples of history needed at `module`'s input so that `context` samples of history plus the
    current ones at its output are exact."""
    if isinstance(module, CausalConv1d):
        if module.stride != 1:
            raise ValueError("strided causal convs do not occur in the decoder")
        return context + (module.kernel_size - 1) * module.dilation
    if isinstance(module, CausalConvTranspose1d):
        # Output sample n reads input frames floor(n/s)-1 and floor(n/s) (kernel 2s, stride s).
        return math.ceil(context / module.stride) + 1
    if isinstance(module, ResidualUnit):
        inner = context
        for layer in reversed(module.block):
            inner = _context_through(layer, inner)
        return max(context, inner)
    if isinstance(module, (DecoderBlock, nn.Sequential)):
        layers = module.block if isinstance(module, DecoderBlock) else module
        for layer in reversed(layers):
            context = _context_through(layer, context)
        return context
    if isinstance(module, SampleRateCondition):
        return context if module.out_layer is None else _context_through(module.out_layer, context)
    if isinstance(module, (Snake1d, nn.Tanh)):
        return context
    raise TypeError(f"no receptive-field rule for {type(module).__name__}")


def decoder_context_frames(audio_vae: AudioVAE) -> int:
    """Latent frames of left context the causal decoder reads for one output frame."""
    decoder = audio_vae.decoder
    context = 0
    for index in reversed(range(len(decoder.model))):
        context = _context_through(decoder.model[index], context)
        if decoder.sr_cond_model is not None and str(index) in decoder.sr_cond_model:
            context = _context_through(decoder.sr_cond_model[str(index)], context)
    return context


def _trim_plan(audio_vae: AudioVAE) -> list[tuple[int, int]]:
    """Per decoder layer i: (upsampling factor at its input, samples of history it needs at its
    input) so that the last frames of the final output stay exact."""
    decoder = audio_vae.decoder
    needs = [0] * len(decoder.model)
    context = 0
    for index in reversed(range(len(decoder.model))):
        context = _context_through(decoder.model[index], context)
        if decoder.sr_cond_model is not None and str(index) in decoder.sr_cond_model:
            context = _context_through(decoder.sr_cond_model[str(index)], context)
        needs[index] = context
    plan, scale = [], 1
    for index, layer in enumerate(decoder.model):
        plan.append((scale, needs[index]))
        if isinstance(layer, DecoderBlock):
            scale *= next(m.stride for m in layer.block if isinstance(m, CausalConvTranspose1d))
    return plan


def vocoder_dtype(device: torch.device) -> torch.dtype:
    """float32 on the CPU (reference parity); on CUDA bfloat16 unless VOXCPM_VOCODER_DTYPE=float32."""
    if device.type != "cuda":
        return torch.float32
    name = os.environ.get("VOXCPM_VOCODER_DTYPE", "bfloat16")
    if name not in _DTYPES:
        raise ValueError(f"VOXCPM_VOCODER_DTYPE={name!r}; allowed: {sorted(_DTYPES)}")
    return _DTYPES[name]


_DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}

# Trimmed lengths are rounded up to this many samples so that every row of the fast path's
# activations starts 16 bytes apart (bf16): vectorised elementwise kernels and aligned GEMM tiles.
# Extra history on the left is harmless: the causal layers never let it reach the kept samples.
ALIGN_SAMPLES = 8


def fast_layers_requested() -> bool:
    return os.environ.get("VOXCPM_VOCODER_FAST_LAYERS", "1") != "0"


def _round_up(length: int, multiple: int) -> int:
    return -(-length // multiple) * multiple


def window_patches(audio_vae: AudioVAE, patch_size: int) -> int:
    """Patches per vocoder window (left context + the new one) so windowed decode equals offline
    decode; the decoder engine needs it without building a vocoder."""
    return 1 + math.ceil(decoder_context_frames(audio_vae) / patch_size)


class WindowedVocoder:
    """decode(windows, new_patches) -> PCM of each window's last k patches; windows are [n, P, D]
    latent patches, the k new ones last, k <= n <= window_patches - 1 + k (k = 1 unless given).

    On CUDA (by default) the decoder runs from its own copy in `dtype` (bfloat16 unless
    VOXCPM_VOCODER_DTYPE=float32), and each layer's input is trimmed to the history the remaining
    layers read (`trim`): a full window is 6 patches but only the last one's samples are kept, so
    the late, high-rate layers would otherwise spend ~5/6 of their work on discarded samples.
    On CUDA each window shape that chunks.PatchChunker makes with up to `max_new_patches` new
    patches replays a CUDA graph per batch bucket (vocoder_graphs.py, all captured here) unless
    `cuda_graphs` is False or VOXCPM_CUDA_GRAPHS=0; other shapes decode eagerly. With
    `custom_ops` (default: on unless VOXCPM_CUSTOM_OPS=0) the CUDA copy's Snake activations run
    the fused snake op (a private copy is then made in float32 too). The CPU path decodes the
    whole window in float32 through `audio_vae` unchanged.

    With `fast_layers` (default on CUDA unless VOXCPM_VOCODER_FAST_LAYERS=0) the CUDA copy runs each
    residual unit's 1x1 conv, bias and skip connection as one batched GEMM, the transposed convs
    and sample-rate conditions write contiguous tensors, trimmed lengths are rounded up to
    ALIGN_SAMPLES, causal convs skip their zero padding where the input already holds the history,
    and the float32 cast happens on the device (inside the CUDA graph); the audio reaches the host
    through pinned memory. Same samples as the plain layers up to rounding."""

    def __init__(self, audio_vae: AudioVAE, patch_size: int, dtype: torch.dtype | None = None,
                 trim: bool | None = None, cuda_graphs: bool | None = None,
                 custom_ops: bool | None = None, fast_layers: bool | None = None,
                 max_new_patches: int = DEFAULT_MAX_NEW) -> None:
        if patch_size < 1:
            raise ValueError(f"patch_size={patch_size}; must be >= 1")
        self.audio_vae = audio_vae
        self.patch_size = patch_size
        self.context_frames = decoder_context_frames(audio_vae)
        self.window_patches = window_patches(audio_vae, patch_size)
        self.samples_per_patch = patch_size * audio_vae.decode_hop_length
        self.sample_rate = audio_vae.sample_rate
        device = next(audio_vae.parameters()).device
        self.device = device
        self.dtype = vocoder_dtype(device) if dtype is None else dtype
        if self.dtype not in _DTYPES.values():
            raise ValueError(f"dtype={self.dtype}; allowed: torch.float32, torch.bfloat16")
        self.trim = device.type == "cuda" if trim is None else trim
        self.custom_ops = device.type == "cuda" and (custom_ops_requested() if custom_ops is None else custom_ops)
        # Forcing it on the CPU runs the same layers there (tests of its logic).
        self.fast_layers = (device.type == "cuda" and fast_layers_requested()) if fast_layers is None else fast_layers
        # A private copy when casting or fusing: the AudioVAE (encoder for prompt audio, offline
        # decode) stays float32 and unfused.
        self.decoder = audio_vae.decoder
        if self.custom_ops or self.fast_layers or self.dtype != next(audio_vae.decoder.parameters()).dtype:
            self.decoder = copy.deepcopy(audio_vae.decoder).to(self.dtype).eval()
            for module in self.decoder.modules():
                if isinstance(module, Snake1d):
                    module.use_op = self.custom_ops
                if isinstance(module, (ResidualUnit, CausalConvTranspose1d, SampleRateCondition, DecoderBlock)):
                    module.fast_path = self.fast_layers
                if isinstance(module, ResidualUnit) and self.fast_layers:
                    module.build_bias_channel()
        # The output rate is fixed, so the fast path applies each sample-rate condition as a
        # precomputed scale and shift (no bucketize or embedding lookups per call).
        self._affines: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        if self.fast_layers and self.decoder.sr_cond_model is not None:
            with torch.inference_mode():
                rate = torch.tensor([self.sample_rate], dtype=torch.int32, device=device)
                bucket = torch.bucketize(rate, self.decoder.sr_bin_boundaries)
                for name, condition in self.decoder.sr_cond_model.items():
                    affine = condition.affine(bucket)
                    if affine is not None:
                        self._affines[name] = (affine[0].clone(), affine[1].clone())
        self._staging: torch.Tensor | None = None  # pinned host buffer of the fast path's output
        self._staging_lock = threading.Lock()
        self._plan = _trim_plan(audio_vae)
        self.graphs: DecodeGraphs | None = None
        if cuda_graphs is None:
            cuda_graphs = os.environ.get("VOXCPM_CUDA_GRAPHS", "1") != "0"
        if device.type == "cuda" and self.trim and cuda_graphs:
            shapes = window_shapes(self.window_patches, max_new_patches)
            self.graphs = DecodeGraphs(self._decode_trimmed, audio_vae.latent_dim, patch_size, shapes, self.dtype,
                                       device)
            with torch.inference_mode():
                self.graphs.warm_up()
        self._graph_lock = threading.Lock()  # graphs share static buffers: one replay at a time

    def _check(self, index: int, window: torch.Tensor, new: int) -> None:
        shape = tuple(window.shape)
        if window.ndim != 3 or shape[1:] != (self.patch_size, self.audio_vae.latent_dim):
            raise ValueError(
                f"windows[{index}] shape {shape}; expected [n, {self.patch_size}, {self.audio_vae.latent_dim}]"
            )
        if not 1 <= new <= shape[0]:
            raise ValueError(f"new_patches[{index}] = {new}; allowed 1..{shape[0]} (the patches of windows[{index}])")
        if shape[0] > self.window_patches - 1 + new:
            raise ValueError(f"windows[{index}] has {shape[0]} patches for {new} new; "
                             f"at most {self.window_patches - 1 + new} (its left context is {self.window_patches - 1})")

    def _decode_trimmed(self, latents: torch.Tensor, new: int = 1) -> torch.Tensor:
        """Decoder.forward over [B, D, frames] keeping, before each layer, only the samples the `new`
        last patches' output depends on -> [B, new * samples_per_patch] (float32 with fast_layers)."""
        decoder = self.decoder
        conditions = decoder.sr_cond_model
        bucket = None
        if conditions is not None and len(self._affines) < len(conditions):
            rate = torch.full((latents.shape[0],), self.sample_rate, dtype=torch.int32, device=latents.device)
            bucket = torch.bucketize(rate, decoder.sr_bin_boundaries)
        x = latents
        for index, layer in enumerate(decoder.model):
            scale, history = self._plan[index]
            needed = self.patch_size * new * scale + history
            keep = _round_up(needed, ALIGN_SAMPLES) if self.fast_layers else needed
            if x.shape[-1] > keep:
                x = x[..., -keep:]
            if str(index) in self._affines:
                gain, shift = self._affines[str(index)]
                x = torch.addcmul(shift, x, gain)
            elif bucket is not None and str(index) in conditions:
                x = conditions[str(index)](x, bucket)
            if self.fast_layers and isinstance(layer, CausalConv1d) and layer.left_pad and x.shape[-1] >= needed:
                # The padded copy would only feed outputs that the later trims drop.
                mono = layer.groups == 1 and layer.stride == 1 and layer.effective_weight().shape[0] == 1
                x = layer.forward_unpadded_mono(x) if mono else layer.forward_unpadded(x)
            else:
                x = layer(x)
        audio = x[:, 0, -new * self.samples_per_patch :]
        return audio.float().contiguous() if self.fast_layers else audio

    def _to_host(self, audio: torch.Tensor) -> np.ndarray:
        """[rows, samples] float32 on the host. With fast_layers, one DMA into pinned staging memory
        and one host copy out of it: the pageable copy (the driver stages it through its own small
        pinned buffer) took 2.2 ms for 256 windows on the H200, a quarter of the PCIe rate."""
        if not (self.fast_layers and audio.device.type == "cuda"):
            return audio.float().cpu().numpy()
        audio = audio.float()
        with self._staging_lock:
            size = audio.numel()  # windows of k new patches are k patches wide: one flat buffer for all
            if self._staging is None or self._staging.numel() < size:
                capacity = 1 << (size - 1).bit_length()  # grows by powers of two: few pinned allocations
                self._staging = torch.empty(capacity, dtype=torch.float32, pin_memory=True)
            staging = self._staging[:size].view(audio.shape)
            staging.copy_(audio, non_blocking=True)
            torch.cuda.current_stream(audio.device).synchronize()
            return staging.numpy().copy()

    @torch.inference_mode()
    def decode(self, windows: Sequence[np.ndarray | torch.Tensor],
               new_patches: Sequence[int] | None = None) -> list[np.ndarray]:
        tensors = [torch.as_tensor(w, dtype=torch.float32) for w in windows]
        news = [1] * len(tensors) if new_patches is None else [int(n) for n in new_patches]
        if len(news) != len(tensors):
            raise ValueError(f"{len(news)} new_patches for {len(tensors)} windows")
        for index, (window, new) in enumerate(zip(tensors, news)):
            self._check(index, window, new)
        outputs: list[np.ndarray | None] = [None] * len(tensors)
        by_shape: dict[tuple[int, int], list[int]] = {}
        for index, (window, new) in enumerate(zip(tensors, news)):
            by_shape.setdefault((window.shape[0], new), []).append(index)
        # One decoder call per distinct (length, new patches): streams past their start mostly
        # share one shape, so a dynamic batch is mostly one call.
        batches = {}
        for shape, indices in by_shape.items():
            batches[shape] = torch.stack([tensors[i] for i in indices])
            # One finiteness check per group (not per window: ~10 us each at 256 windows a call).
            if not torch.isfinite(batches[shape]).all():
                bad = next(i for i in indices if not torch.isfinite(tensors[i]).all())
                raise ValueError(f"windows[{bad}] holds non-finite values")
        for (length, new), indices in by_shape.items():
            batch = batches[length, new].to(self.device, self.dtype)
            latents = batch.permute(0, 3, 1, 2).reshape(len(indices), self.audio_vae.latent_dim, -1)
            graph = self.graphs.get(len(indices), length, new) if self.graphs is not None else None
            if graph is not None:
                with self._graph_lock:
                    audio = self._to_host(graph.run(latents))
            elif self.trim:
                audio = self._to_host(self._decode_trimmed(latents, new))
            else:
                kept = new * self.samples_per_patch
                audio = self._to_host(self.decoder(latents, self.sample_rate)[:, 0, -kept:])
            for row, index in enumerate(indices):
                outputs[index] = np.ascontiguousarray(audio[row])
        return outputs  # type: ignore[return-value]
