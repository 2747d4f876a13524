"""ModelRunner: the only owner of device state (KV caches, per-slot hidden states, noise generators).

Two calls per engine step: `prefill(admitted)` fills the slots of newly admitted streams with one
padded batch pass over their prompts, then `launch(running)` queues the step that advances every
live stream by one patch in one batch, with ragged positions. The step ends with its only
device-to-host copy (patches and stop flags together), read by the PendingStep it returns; the
engine may launch the next step before reading it. `decode` is launch and read in one.

Two decode paths. On the CPU the reference-faithful one: per-step noise draws, attention over the
longest live prefix. On CUDA the fixed-shape one (`_fixed_advance`): a batch padded to a bucket
(padding rows use the scratch slot, the last of every per-slot tensor), attention through the
rope_kv_write / decode_attention ops over per-slot lengths, noise read from a per-slot ring; its
shapes depend only on the bucket, so it is captured once per (bucket, timesteps) as a CUDA graph
(cuda_graphs.py) and replayed; small admissions replay a prefill graph per (rows, padded
length) the same way (prefill_graphs.py). VOXCPM_CUDA_GRAPHS=0 runs both eagerly.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch

from voxcpm_triton.engine.cuda_graphs import StepGraphs, buckets_for, graphs_requested
from voxcpm_triton.engine.device_guard import current, on_own_device
from voxcpm_triton.engine.noise import NoiseRing, block_from_env
from voxcpm_triton.engine.pending_step import PendingStep, StagingBuffers
from voxcpm_triton.engine.prefill_graphs import MAX_ROWS, PrefillGraphs, graphable_prefill, length_bucket
from voxcpm_triton.engine.request import TIMESTEPS_DEFAULT
from voxcpm_triton.engine.scheduler import Stream
from voxcpm_triton.engine.slots import KVCache
from voxcpm_triton.model.fast_path import (compile_layers, compile_requested, custom_ops_requested, enable_custom_ops,
                                           enable_folded_norms, enable_folded_statistics, enable_fp8,
                                           enable_sm90_gate_up, folded_copy_bytes, folded_decode_requested,
                                           folded_dit_requested, folded_encoder_requested, folded_norms_requested,
                                           fp8_min_rows, fp8_requested)
from voxcpm_triton.model.attention import DecodeSlots
from voxcpm_triton.model.voxcpm import VoxCPMModel
from voxcpm_triton import ops
from voxcpm_triton.ops import library as ops_library

KERNEL_HEAD_DIMS = (64, 128)  # what decode_attention supports on the GPU


def with_audio(streams: list[Stream]) -> bool:
    """Whether any admitted prompt has audio positions (prompt or reference voice): only then does
    the prefill run LocEnc over the prompts."""
    return any(bool(s.request.audio_mask.any()) for s in streams)


class ModelRunner:
    def __init__(self, model: VoxCPMModel, max_slots: int, max_context: int, device: torch.device,
                 cuda_graphs: bool | None = None, custom_ops: bool | None = None,
                 compile_layers_: bool | None = None, warm_up_graphs: bool = True,
                 fixed_shape: bool | None = None, kernel_attention: bool | None = None, fp8: bool | None = None):
        """cuda_graphs / custom_ops / compile_layers_ / fp8: None reads VOXCPM_CUDA_GRAPHS,
        VOXCPM_CUSTOM_OPS, VOXCPM_COMPILE, VOXCPM_FP8. fixed_shape (default: on CUDA) picks the fixed-shape
        step; kernel_attention (default: when the kernels library can serve these head sizes)
        its attention through the ops. Tests force both on the CPU, where the ops run their
        references, to check the fixed-shape step against the reference path."""
        config = model.config
        self.model = model
        self.device = device
        self.max_context = max_context
        self.dtype = model.stop_proj.weight.dtype
        self.patch_shape = (config.patch_size, config.feat_dim)
        self.base_cache = KVCache(config.lm, max_slots, max_context, device, self.dtype)
        self.residual_cache = KVCache(config.residual_lm, max_slots, max_context, device, self.dtype)
        hidden = config.lm.hidden_size
        self.scratch_slot = max_slots
        rows = max_slots + 1
        # What the next decode step of each slot starts from (the reference loop's lm_hidden,
        # residual_hidden and prefix_feat_cond); row `scratch_slot` belongs to padding rows.
        self.lm_hidden = torch.zeros(rows, hidden, device=device, dtype=self.dtype)
        self.residual_hidden = torch.zeros(rows, hidden, device=device, dtype=self.dtype)
        self.prev_patch = torch.zeros(rows, *self.patch_shape, device=device, dtype=self.dtype)
        self.cfg_value = torch.zeros(rows, device=device, dtype=torch.float32)
        self.positions = torch.zeros(rows, device=device, dtype=torch.int64)
        self.generators: list[torch.Generator | None] = [None] * max_slots
        self.fixed_shape = device.type == "cuda" if fixed_shape is None else fixed_shape
        self.graphs: StepGraphs | None = None
        self.folded_bytes = 0
        if self.fixed_shape:
            with current(device):  # the graphs' warm-up captures
                self._setup_fixed(max_slots, cuda_graphs, custom_ops, compile_layers_, warm_up_graphs,
                                  kernel_attention, fp8)

    def _setup_fixed(self, max_slots: int, cuda_graphs: bool | None, custom_ops: bool | None,
                     compile_layers_: bool | None, warm_up_graphs: bool, kernel_attention: bool | None,
                     fp8: bool | None) -> None:
        config = self.model.config
        on_cuda = self.device.type == "cuda"
        self.custom_ops = custom_ops_requested() if custom_ops is None else custom_ops
        enable_custom_ops(self.model, self.custom_ops)
        # Opt-in FP8 LocDiT GEMMs at large batches (VOXCPM_FP8=1); off, the step is the bf16 one.
        self.fp8 = self.custom_ops and (fp8_requested() if fp8 is None else fp8)
        enable_fp8(self.model, self.fp8, fp8_min_rows())
        gpu_ops = self.custom_ops and on_cuda
        enable_sm90_gate_up(self.model, gpu_ops)
        # The FP8 mode keeps its own LocDiT path (MiniCPMModel._folded_norms_take): no folded copies then.
        enable_folded_norms(self.model, gpu_ops and folded_norms_requested() and not self.fp8)
        # Nor the LocDiT's plain folded path (MiniCPMModel._folded_plain_takes), whose copies would sit unused.
        enable_folded_statistics(self.model, gpu_ops and folded_decode_requested(),
                                 gpu_ops and folded_encoder_requested(),
                                 gpu_ops and folded_dit_requested() and not self.fp8)
        # What the folded copies cost in GPU memory (VoxCPM2: ~2.9 GB), for the decoder's start log.
        self.folded_bytes = folded_copy_bytes(self.model)
        if on_cuda and (compile_requested() if compile_layers_ is None else compile_layers_):
            compile_layers(self.model)
        if kernel_attention is None:
            kernel_attention = (ops_library.kernels_loaded() and self.dtype in ops_library.KERNEL_DTYPES
                                and config.lm.head_dim in KERNEL_HEAD_DIMS
                                and config.residual_lm.head_dim in KERNEL_HEAD_DIMS)
        self.kernel_attention = kernel_attention
        self.buckets = buckets_for(max_slots)
        self.noise = NoiseRing(max_slots, *self.patch_shape, block_from_env(), self.device, self.dtype)
        width = self.patch_shape[0] * self.patch_shape[1] + 1
        self._staging = StagingBuffers(self.buckets[-1], width, self.device)  # steps pad to their bucket
        self.prefill_graphs: PrefillGraphs | None = None
        if on_cuda and (graphs_requested() if cuda_graphs is None else cuda_graphs):
            self.prefill_graphs = PrefillGraphs(self._prefill_advance, self.device, self._prefill_inputs,
                                                self.scratch_slot)
            self.graphs = StepGraphs(self._fixed_advance, self.device, max_slots, self.scratch_slot)
            if warm_up_graphs:
                self.graphs.warm_up(TIMESTEPS_DEFAULT)  # a request's default: captured at start
                self.prefill_graphs.warm_up(self.max_context, tuple(b for b in self.buckets if b <= MAX_ROWS))

    def _upload(self, values: torch.Tensor | list) -> torch.Tensor:
        """Host data -> device. Callers upload before queueing any kernel of the step: a pageable
        copy waits for the device queue, which is empty only at the start of a step."""
        return torch.as_tensor(values).to(self.device)

    @on_own_device
    @torch.inference_mode()
    def prefill(self, streams: list[Stream]) -> None:
        """Run the prompts of newly admitted streams (right-padded into one batch) and fill their slots."""
        if not streams:
            return
        if self.fixed_shape:
            self._prefill_fixed(streams)
            return
        lengths = [s.request.prompt_length for s in streams]
        longest = max(lengths)
        tokens = torch.zeros(len(streams), longest, dtype=torch.int64)
        feats = torch.zeros(len(streams), longest, *self.patch_shape)
        text_mask = torch.zeros(len(streams), longest, dtype=torch.int32)
        audio_mask = torch.zeros(len(streams), longest, dtype=torch.int32)
        for row, stream in enumerate(streams):
            request, length = stream.request, lengths[row]
            tokens[row, :length] = request.tokens
            feats[row, :length] = request.feats
            text_mask[row, :length] = request.text_mask
            audio_mask[row, :length] = request.audio_mask
        tokens, feats, text_mask, audio_mask = map(self._upload, (tokens, feats, text_mask, audio_mask))
        last = self._upload([length - 1 for length in lengths])
        slots = self._upload([s.slot for s in streams])
        cfg_value = self._upload([float(s.request.cfg_value) for s in streams])

        feats = feats.to(self.dtype)
        out = self.model.prefill(tokens, feats, text_mask, audio_mask, with_audio(streams))
        rows = torch.arange(len(streams), device=self.device)
        for row, stream in enumerate(streams):
            self.base_cache.write_prompt(stream.slot, out.base_kv, row, lengths[row])
            self.residual_cache.write_prompt(stream.slot, out.residual_kv, row, lengths[row])
            generator = torch.Generator(device=self.device)
            generator.manual_seed(stream.request.seed)
            self.generators[stream.slot] = generator
        self.lm_hidden[slots] = out.lm_hidden[rows, last]
        self.residual_hidden[slots] = out.residual_hidden[rows, last]
        self.prev_patch[slots] = feats[rows, last]
        self.positions[slots] = last + 1
        self.cfg_value[slots] = cfg_value

    def _prefill_inputs(self, rows: int, length: int, streams: list[Stream] = ()) -> tuple[torch.Tensor, ...]:
        """Host tensors of a padded admission: tokens, feats (model dtype), text_mask, audio_mask
        [rows, length(, P, D)], each row's last prompt position, slot (padding: scratch) and cfg."""
        tokens = torch.zeros(rows, length, dtype=torch.int64)
        feats = torch.zeros(rows, length, *self.patch_shape, dtype=self.dtype)
        text_mask = torch.zeros(rows, length, dtype=torch.int32)
        audio_mask = torch.zeros(rows, length, dtype=torch.int32)
        last = torch.zeros(rows, dtype=torch.int64)
        slots = torch.full((rows,), self.scratch_slot, dtype=torch.int64)
        cfg_value = torch.zeros(rows, dtype=torch.float32)
        for row, stream in enumerate(streams):
            request = stream.request
            size = request.prompt_length
            tokens[row, :size] = request.tokens
            feats[row, :size] = request.feats.to(self.dtype)
            text_mask[row, :size] = request.text_mask
            audio_mask[row, :size] = request.audio_mask
            last[row], slots[row], cfg_value[row] = size - 1, stream.slot, float(request.cfg_value)
        return tokens, feats, text_mask, audio_mask, last, slots, cfg_value

    def _prefill_fixed(self, streams: list[Stream]) -> None:
        """With prefill graphs, an admission of more than MAX_ROWS prompts runs as groups of
        MAX_ROWS (prompts of similar length together, so little padding), each a graph replay."""
        if self.prefill_graphs is None or self.prefill_graphs.failure is not None or len(streams) <= MAX_ROWS:
            self._prefill_group(streams)
            return
        ordered = sorted(streams, key=lambda s: s.request.prompt_length)
        for start in range(0, len(ordered), MAX_ROWS):
            self._prefill_group(ordered[start:start + MAX_ROWS])

    def _prefill_group(self, streams: list[Stream]) -> None:
        """Prefill padded to a row bucket and a length bucket; small admissions replay a graph."""
        rows = next((b for b in self.buckets if b >= len(streams)), len(streams))
        longest = max(s.request.prompt_length for s in streams)
        length = length_bucket(longest, self.max_context)
        if not graphable_prefill(rows, length):  # large admissions run eagerly, unpadded
            rows, length = len(streams), longest
        host_inputs = self._prefill_inputs(rows, length, streams)
        audio = with_audio(streams)
        graph = self.prefill_graphs.get(rows, length, audio) if self.prefill_graphs is not None else None
        if graph is not None:
            graph.run(host_inputs)
        else:  # padded like the graph when one could serve it: eager and graphed runs match
            self._prefill_advance(*(t.to(self.device) for t in host_inputs), with_audio=audio)
        for stream in streams:
            generator = torch.Generator(device=self.device)
            generator.manual_seed(stream.request.seed)
            self.generators[stream.slot] = generator

    def _prefill_advance(self, tokens: torch.Tensor, feats: torch.Tensor, text_mask: torch.Tensor,
                         audio_mask: torch.Tensor, last: torch.Tensor, slots: torch.Tensor,
                         cfg_value: torch.Tensor, with_audio: bool = True) -> None:
        """Device-only prefill of a padded admission (what a prefill graph captures): both LMs
        over the prompts, their K/V into the slots' cache rows [0, length), the decode state.
        with_audio: whether any prompt position is audio (see VoxCPMModel.prefill)."""
        out = self.model.prefill(tokens, feats, text_mask, audio_mask, with_audio)
        length = tokens.shape[1]
        for cache, kv in ((self.base_cache, out.base_kv), (self.residual_cache, out.residual_kv)):
            for layer, (k, v) in enumerate(kv):
                cache.k[layer, slots, :, :length] = k
                cache.v[layer, slots, :, :length] = v
        rows = torch.arange(tokens.shape[0], device=tokens.device)
        self.lm_hidden[slots] = out.lm_hidden[rows, last]
        self.residual_hidden[slots] = out.residual_hidden[rows, last]
        self.prev_patch[slots] = feats[rows, last]
        self.positions[slots] = last + 1
        self.cfg_value[slots] = cfg_value
        self.positions[self.scratch_slot:].zero_()

    def _noise(self, streams: list[Stream]) -> torch.Tensor:
        """Each stream's own draw, [B, P, D]; drawn as [D, P] like the reference so seeds line up."""
        draws = [torch.randn((1, self.patch_shape[1], self.patch_shape[0]), generator=self.generators[s.slot],
                             device=self.device, dtype=self.dtype) for s in streams]
        return torch.cat(draws).transpose(1, 2)

    def _timestep_groups(self, streams: list[Stream], rows: int | None = None) -> list[tuple[int, torch.Tensor | None]]:
        """(timesteps, batch rows or None for all rows) per distinct timestep count in the batch;
        padding rows up to `rows` join the first stream's group."""
        groups: dict[int, list[int]] = defaultdict(list)
        for row, stream in enumerate(streams):
            groups[stream.request.timesteps].append(row)
        groups[streams[0].request.timesteps] += list(range(len(streams), rows or len(streams)))
        if len(groups) == 1:
            return [(next(iter(groups)), None)]
        return [(timesteps, self._upload(rows)) for timesteps, rows in groups.items()]

    def _sample(self, groups: list[tuple[int, torch.Tensor | None]], noise: torch.Tensor, mu: torch.Tensor,
                cond: torch.Tensor, cfg_value: torch.Tensor) -> torch.Tensor:
        """Run the flow-matching sampler once per distinct timestep count in the batch."""
        sampler = self.model.feat_decoder
        if len(groups) == 1:
            return sampler.sample(noise, mu, cond, groups[0][0], cfg_value)
        patch = torch.empty_like(noise)
        for timesteps, index in groups:
            patch[index] = sampler.sample(noise[index], mu[index], cond[index], timesteps, cfg_value[index])
        return patch

    def decode(self, streams: list[Stream]) -> tuple[np.ndarray, np.ndarray]:
        """One generation step for every stream -> (patches float32 [B, P, D], stop flags bool [B])."""
        return self.launch(streams).result()

    @on_own_device
    @torch.inference_mode()
    def launch(self, streams: list[Stream]) -> PendingStep:
        """Queue one generation step for every stream and advance each one's `launched` count.

        Host data is uploaded and the noise drawn first (per-stream generators, outside any
        graph), the step's device work runs (a graph replay on CUDA), and the single host copy
        comes last; on the CPU path the step has finished when this returns. At most one step
        may be left unread when the next is launched: the one before it is read out first."""
        if self.fixed_shape:
            pending = self._launch_fixed(streams)
        else:
            slots = self._upload([s.slot for s in streams])
            groups = self._timestep_groups(streams)
            noise = self._noise(streams)
            span = max(s.position for s in streams) + 1
            patch, stop = self._advance(groups, slots, noise, span)
            host = torch.cat((patch.flatten(1).float(), stop.float().unsqueeze(1)), dim=1).cpu().numpy()
            pending = PendingStep.ready(host, self.patch_shape)
        for stream in streams:
            stream.launched += 1
        return pending

    def _advance(self, groups: list[tuple[int, torch.Tensor | None]], slots: torch.Tensor, noise: torch.Tensor,
                 span: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The reference loop body for a batch: sample the patch from the current hidden states,
        read the stop head, then feed the patch through LocEnc and both LMs for the next step."""
        model = self.model
        lm_hidden, residual_hidden = self.lm_hidden[slots], self.residual_hidden[slots]
        mu = model.dit_condition(lm_hidden, residual_hidden)
        patch = self._sample(groups, noise, mu, self.prev_patch[slots], self.cfg_value[slots])
        stop = model.stop_logits(lm_hidden).argmax(dim=-1) == 1

        where = DecodeSlots(slots, self.positions[slots], span)
        patch_embed = model.embed_patches(patch.unsqueeze(1))[:, 0]
        next_lm, next_residual = model.decode_lms(patch_embed, self.base_cache.pair, self.residual_cache.pair, where)
        self.lm_hidden[slots] = next_lm
        self.residual_hidden[slots] = next_residual
        self.prev_patch[slots] = patch
        self.positions[slots] += 1
        return patch, stop

    def _launch_fixed(self, streams: list[Stream]) -> PendingStep:
        batch = len(streams)
        slots = np.fromiter((s.slot for s in streams), dtype=np.int64, count=batch)
        launched = np.fromiter((s.launched for s in streams), dtype=np.int64, count=batch)
        noise_rows = self.noise.rows(slots, launched, self.generators)
        timesteps = {s.request.timesteps for s in streams}
        graph = None
        if self.graphs is not None and len(timesteps) == 1:
            graph = self.graphs.get(batch, next(iter(timesteps)))
        # Eager runs pad to the same bucket, so graphed and eager steps run identical shapes.
        size = graph.batch if graph is not None else next((b for b in self.buckets if b >= batch), batch)
        host_index, host_out = self._staging.take(size)
        index = host_index.numpy()  # numpy writes: a few torch ops on tiny tensors cost more
        index[0, :batch], index[0, batch:] = slots, self.scratch_slot
        index[1, :batch], index[1, batch:] = noise_rows, 0
        pinned = self.device.type == "cuda"
        if graph is not None:
            graph.index.copy_(host_index, non_blocking=True)
            out = graph.replay()
        else:
            index = host_index.to(self.device, non_blocking=True)
            out = self._fixed_advance(index, self._timestep_groups(streams, size))
        host_out.copy_(out, non_blocking=pinned)
        pending = PendingStep(host_out, batch, self.patch_shape, self._staging.done_event())
        return self._staging.launched(pending)

    def _fixed_advance(self, index: torch.Tensor, groups: list[tuple[int, torch.Tensor | None]]) -> torch.Tensor:
        """`_advance` with shapes fixed by the batch: index [2, B] holds each row's slot (padding:
        the scratch slot) and noise-ring row. Returns [B, P * D + 1] float32: patch, stop flag.
        Device work only, no host synchronisation: this is what a CUDA graph captures."""
        model = self.model
        gather, scatter = ((ops.step_gather, ops.step_scatter) if self.custom_ops
                           else (ops.step_gather_ref, ops.step_scatter_ref))
        tables = (self.lm_hidden, self.residual_hidden, self.prev_patch)
        noise, lm_hidden, residual_hidden, prev_patch, cfg_value, kernel_index = gather(
            index, self.noise.ring, *tables, self.cfg_value, self.positions)
        mu = model.dit_condition(lm_hidden, residual_hidden)
        patch = self._sample(groups, noise, mu, prev_patch, cfg_value)
        stop_logits = model.stop_logits(lm_hidden)

        slots, positions, lengths = kernel_index.unbind(0)
        where = DecodeSlots(slots, positions, self.max_context,
                            (slots, positions, lengths) if self.kernel_attention else None)
        patch_embed = model.embed_patches(patch.unsqueeze(1))[:, 0]
        next_lm, next_residual = model.decode_lms(patch_embed, self.base_cache.pair, self.residual_cache.pair, where)
        # Padding rows keep the scratch slot's position at 0, so they write its cache row 0 every step.
        return scatter(index, lengths, next_lm, next_residual, patch, stop_logits, *tables, self.positions)
