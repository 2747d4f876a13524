"""ModelRunner: the only owner of device state (KV caches, per-slot hidden states, noise generators).

Two calls per engine step: `prefill(admitted)` fills the slots of newly admitted streams with one
padded batch pass over their prompts, then `decode(running)` advances every live stream by one
patch in one batch, with ragged positions. `decode` ends with the step's only device-to-host copy
(patches and stop flags together). CUDA graphs per batch bucket and custom ops belong here.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch

from voxcpm_triton.engine.scheduler import Stream
from voxcpm_triton.engine.slots import KVCache
from voxcpm_triton.model.minicpm import DecodeSlots
from voxcpm_triton.model.voxcpm import VoxCPMModel


class ModelRunner:
    def __init__(self, model: VoxCPMModel, max_slots: int, max_context: int, device: torch.device):
        config = model.config
        self.model = model
        self.device = device
        self.dtype = model.stop_proj.weight.dtype
        self.patch_shape = (config.patch_size, config.feat_dim)
        self.base_cache = KVCache(config.lm, max_slots, max_context, device, self.dtype)
        self.residual_cache = KVCache(config.residual_lm, max_slots, max_context, device, self.dtype)
        hidden = config.lm.hidden_size
        # What the next decode step of each slot starts from (the reference loop's lm_hidden,
        # residual_hidden and prefix_feat_cond).
        self.lm_hidden = torch.zeros(max_slots, hidden, device=device, dtype=self.dtype)
        self.residual_hidden = torch.zeros(max_slots, hidden, device=device, dtype=self.dtype)
        self.prev_patch = torch.zeros(max_slots, *self.patch_shape, device=device, dtype=self.dtype)
        self.cfg_value = torch.zeros(max_slots, device=device, dtype=torch.float32)
        self.positions = torch.zeros(max_slots, device=device, dtype=torch.int64)
        self.generators: list[torch.Generator | None] = [None] * max_slots

    def _upload(self, values: torch.Tensor | list) -> torch.Tensor:
        """Host data -> device. Callers upload before queueing any kernel of the step: a pageable
        copy waits for the device queue, which is empty only at the start of a step."""
        return torch.as_tensor(values).to(self.device)

    @torch.inference_mode()
    def prefill(self, streams: list[Stream]) -> None:
        """Run the prompts of newly admitted streams (right-padded into one batch) and fill their slots."""
        if not streams:
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
        out = self.model.prefill(tokens, feats, text_mask, audio_mask)
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

    def _noise(self, streams: list[Stream]) -> torch.Tensor:
        """Each stream's own draw, [B, P, D]; drawn as [D, P] like the reference so seeds line up."""
        draws = [torch.randn((1, self.patch_shape[1], self.patch_shape[0]), generator=self.generators[s.slot],
                             device=self.device, dtype=self.dtype) for s in streams]
        return torch.cat(draws).transpose(1, 2)

    def _timestep_groups(self, streams: list[Stream]) -> list[tuple[int, torch.Tensor | None]]:
        """(timesteps, batch rows or None for all rows) per distinct timestep count in the batch."""
        groups: dict[int, list[int]] = defaultdict(list)
        for row, stream in enumerate(streams):
            groups[stream.request.timesteps].append(row)
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

    @torch.inference_mode()
    def decode(self, streams: list[Stream]) -> tuple[np.ndarray, np.ndarray]:
        """One generation step for every stream -> (patches float32 [B, P, D], stop flags bool [B]).

        Split for CUDA graphs: host data is uploaded and the noise drawn first (per-stream
        generators, outside any graph), `_advance` is device work only, and the single host copy
        comes last. In `_advance` only `span` (the longest live cache prefix) varies with the
        streams' lengths; a graph per batch bucket would attend over a fixed span with per-slot
        lengths instead."""
        slots = self._upload([s.slot for s in streams])
        groups = self._timestep_groups(streams)
        noise = self._noise(streams)
        span = max(s.position for s in streams) + 1
        patch, stop = self._advance(groups, slots, noise, span)
        host = torch.cat((patch.flatten(1).float(), stop.float().unsqueeze(1)), dim=1).cpu().numpy()
        return host[:, :-1].reshape(len(streams), *self.patch_shape), host[:, -1] > 0.5

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
