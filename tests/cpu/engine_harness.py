"""Helpers for engine tests: tiny model pairs, running requests to completion, and the patches the
reference's own inference loop makes for the same request."""

from __future__ import annotations

import numpy as np
import torch

from tests.cpu.tiny_reference import build_reference_model, model_state, tiny_config_dict
from voxcpm_triton.config import parse_config
from voxcpm_triton.engine.engine import Engine
from voxcpm_triton.engine.prefill import build_prefill
from voxcpm_triton.engine.request import GenerationRequest
from voxcpm_triton.model.voxcpm import VoxCPMModel, build_model


def model_pair(variant: str, seed: int = 1):
    """(reference, ours) with identical tiny random weights; the stop head is made to fire on
    roughly half the steps so that both the stop path and the max_len path get exercised."""
    raw = tiny_config_dict(variant)
    reference = build_reference_model(raw, seed=seed)
    with torch.no_grad():
        reference.stop_head.weight[1] = -reference.stop_head.weight[0]
    ours = build_model(parse_config(raw)).eval()
    ours.load_state_dict(model_state(reference), strict=True)
    return reference, ours


def make_request(model: VoxCPMModel, request_id: str, text_tokens, ref=None, prompt=None, **settings) -> GenerationRequest:
    seq = build_prefill(text_tokens, ref, prompt, model.config)
    return GenerationRequest(request_id, seq.tokens, seq.feats, seq.text_mask, seq.audio_mask,
                             seq.context_patches, **settings)


def run_to_completion(engine: Engine, requests: list[GenerationRequest]) -> dict[str, np.ndarray]:
    """Submit all, step until every stream finished; returns each stream's patches [N, P, D]."""
    for request in requests:
        engine.submit(request)
    patches: dict[str, list[np.ndarray]] = {r.request_id: [] for r in requests}
    done: set[str] = set()
    for _ in range(10_000):
        for output in engine.step():
            assert output.error is None, output.error
            patches[output.request_id].append(output.window[-1])
            if output.finished:
                done.add(output.request_id)
        if len(done) == len(requests):
            return {rid: np.stack(p) for rid, p in patches.items()}
    raise AssertionError("engine did not finish")


def reference_patches(reference, request, min_len, max_len, timesteps, cfg_value, seed) -> np.ndarray:
    """The generated patches [N, P, D] of the reference's `_inference` for `request`."""
    torch.manual_seed(seed)
    result = reference._inference(request.tokens[None], request.text_mask[None], request.feats[None],
                                  request.audio_mask[None], min_len=min_len, max_len=max_len,
                                  inference_timesteps=timesteps, cfg_value=cfg_value, streaming=False)
    try:
        sequence = next(result)[1]
    finally:
        result.close()
    # VoxCPM1.x returns its context patches in front of the generated ones.
    if not hasattr(reference, "fusion_concat_proj"):
        sequence = sequence[request.context_patches.shape[0]:]
    return sequence.numpy()
