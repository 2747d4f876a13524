"""Sampling parameters a client may set, with their defaults and allowed ranges (the README's tensor
table lists the same values)."""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from typing import Callable

import numpy as np

from voxcpm_triton.engine.request import (CFG_VALUE_DEFAULT, CFG_VALUE_RANGE, SEED_RANGE, TIMESTEPS_DEFAULT,
                                          TIMESTEPS_RANGE)
from voxcpm_triton.serving.inputs import in_range, scalar

MAX_SECONDS_RANGE = (0.1, 600.0)
FP32_EPSILON = float(np.finfo(np.float32).eps)


@dataclass(frozen=True)
class SamplingParameters:
    cfg_value: float
    timesteps: int
    max_seconds: float | None  # None: the model's own length limit only
    seed: int

    def max_patches(self, seconds_per_patch: float) -> int | None:
        """MAX_SECONDS as a count of generated patches (at least one): a whole number of patches gives
        that many, whatever else is rounded up."""
        if self.max_seconds is None:
            return None
        count = self.max_seconds / seconds_per_patch
        # The tensor is FP32: 0.8 s arrives as 0.800000011920929, 5.0000000745 patches of 0.16 s.
        whole = round(count)
        if math.isclose(count, whole, rel_tol=FP32_EPSILON):
            return max(1, whole)
        return max(1, math.ceil(count))


def read_sampling_parameters(get: Callable[[str], np.ndarray | None]) -> SamplingParameters:
    """Parameters from the request tensors CFG_VALUE, TIMESTEPS, MAX_SECONDS and SEED (each optional).

    Without SEED each request draws its own, so identical requests differ as in the reference; send
    SEED to make the audio reproducible."""
    cfg_value = scalar("CFG_VALUE", get("CFG_VALUE"), float, CFG_VALUE_DEFAULT)
    timesteps = scalar("TIMESTEPS", get("TIMESTEPS"), int, TIMESTEPS_DEFAULT)
    max_seconds = scalar("MAX_SECONDS", get("MAX_SECONDS"), float, None)
    seed = scalar("SEED", get("SEED"), int, None)
    in_range("CFG_VALUE", cfg_value, *CFG_VALUE_RANGE)
    in_range("TIMESTEPS", timesteps, *TIMESTEPS_RANGE)
    if max_seconds is not None:
        in_range("MAX_SECONDS", max_seconds, *MAX_SECONDS_RANGE)
    if seed is None:
        seed = secrets.randbelow(SEED_RANGE[1] + 1)
    in_range("SEED", seed, *SEED_RANGE)
    return SamplingParameters(cfg_value, timesteps, max_seconds, seed)
