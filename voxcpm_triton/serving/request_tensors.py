"""The tensors text_encoder sends ar_decoder: a GenerationRequest flattened into named numpy arrays
(one request per Triton request; the leading batch dimension of 1 is added and removed here). The
names differ from the client's CFG_VALUE/TIMESTEPS/SEED because text_encoder takes those as inputs."""

from __future__ import annotations

import numpy as np
import torch

from voxcpm_triton.engine.request import GenerationRequest, runaway_guard_max_len
from voxcpm_triton.serving.inputs import InputError

# name -> numpy dtype on the wire
WIRE_DTYPES = {
    "TOKENS": np.int64,
    "FEATS": np.float32,
    "TEXT_MASK": np.int32,
    "AUDIO_MASK": np.int32,
    "CONTEXT_PATCHES": np.float32,
    "MIN_LEN": np.int32,
    "MAX_LEN": np.int32,
    "CFG": np.float32,
    "STEPS": np.int32,
    "NOISE_SEED": np.int64,
}


def to_wire(request: GenerationRequest) -> dict[str, np.ndarray]:
    """Arrays with a leading batch dimension of 1, as a batched Triton model returns them.

    The runaway guard (target_text_tokens) is folded into MAX_LEN here, so it need not travel;
    MAX_LEN -1 stands for no limit but the context."""
    max_len = request.max_len
    if request.target_text_tokens is not None:
        max_len = runaway_guard_max_len(request.target_text_tokens, max_len)
    arrays = {
        "TOKENS": request.tokens.cpu().numpy(),
        "FEATS": request.feats.float().cpu().numpy(),
        "TEXT_MASK": request.text_mask.cpu().numpy(),
        "AUDIO_MASK": request.audio_mask.cpu().numpy(),
        "CONTEXT_PATCHES": request.context_patches.float().cpu().numpy(),
        "MIN_LEN": np.array([request.min_len]),
        "MAX_LEN": np.array([-1 if max_len is None else max_len]),
        "CFG": np.array([request.cfg_value]),
        "STEPS": np.array([request.timesteps]),
        "NOISE_SEED": np.array([request.seed]),
    }
    return {name: np.ascontiguousarray(value, dtype=WIRE_DTYPES[name])[None] for name, value in arrays.items()}


def _unbatch(name: str, array: np.ndarray, ndim: int) -> np.ndarray:
    if array.ndim == ndim + 1:
        if array.shape[0] != 1:
            raise InputError(f"{name} has batch dimension {array.shape[0]}; one request carries one stream")
        array = array[0]
    if array.ndim != ndim:
        raise InputError(f"{name} has shape {list(array.shape)}; expected {ndim} dimensions")
    return array


def from_wire(arrays: dict[str, np.ndarray], request_id: str) -> GenerationRequest:
    """Rebuild the request, checking that the per-position tensors agree in length and shape."""
    missing = [name for name in WIRE_DTYPES if arrays.get(name) is None]
    if missing:
        raise InputError(f"missing input tensors: {', '.join(missing)}")
    tokens = _unbatch("TOKENS", arrays["TOKENS"], 1)
    feats = _unbatch("FEATS", arrays["FEATS"], 3)
    text_mask = _unbatch("TEXT_MASK", arrays["TEXT_MASK"], 1)
    audio_mask = _unbatch("AUDIO_MASK", arrays["AUDIO_MASK"], 1)
    context = _unbatch("CONTEXT_PATCHES", arrays["CONTEXT_PATCHES"], 3)
    length = tokens.shape[0]
    if length == 0:
        raise InputError("TOKENS is empty")
    for name, array in (("FEATS", feats), ("TEXT_MASK", text_mask), ("AUDIO_MASK", audio_mask)):
        if array.shape[0] != length:
            raise InputError(f"{name} has {array.shape[0]} positions; TOKENS has {length}")
    if context.shape[0] and context.shape[1:] != feats.shape[1:]:
        raise InputError(f"CONTEXT_PATCHES patches are {list(context.shape[1:])}; FEATS has {list(feats.shape[1:])}")
    if not (np.isfinite(feats).all() and np.isfinite(context).all()):
        raise InputError("FEATS or CONTEXT_PATCHES hold non-finite values")
    scalars = {name: _unbatch(name, arrays[name], 1).reshape(-1) for name in ("MIN_LEN", "MAX_LEN", "CFG", "STEPS", "NOISE_SEED")}
    for name, value in scalars.items():
        if value.size != 1:
            raise InputError(f"{name} must hold one value, got {value.size}")
    return GenerationRequest(
        request_id=request_id,
        tokens=torch.from_numpy(np.ascontiguousarray(tokens, dtype=np.int64)),
        feats=torch.from_numpy(np.ascontiguousarray(feats, dtype=np.float32)),
        text_mask=torch.from_numpy(np.ascontiguousarray(text_mask, dtype=np.int32)),
        audio_mask=torch.from_numpy(np.ascontiguousarray(audio_mask, dtype=np.int32)),
        context_patches=torch.from_numpy(np.ascontiguousarray(context, dtype=np.float32)),
        min_len=int(scalars["MIN_LEN"][0]),
        max_len=None if int(scalars["MAX_LEN"][0]) == -1 else int(scalars["MAX_LEN"][0]),
        cfg_value=float(scalars["CFG"][0]),
        timesteps=int(scalars["STEPS"][0]),
        seed=int(scalars["NOISE_SEED"][0]),
    )
