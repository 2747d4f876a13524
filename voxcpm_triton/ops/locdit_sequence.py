"""The LocDiT's input sequence for both guidance branches: CUDA op and PyTorch reference.

Every Euler step builds [2 * batch, L, hidden] rows (per branch and stream: mu tokens, the step's
time token, the projected condition, the projected noisy patch) of which only mu differs between
the branches. torch.cat over broadcast views of the shared parts runs its strided path; the op is
one copy kernel. Its output is bit for bit the concatenation.
"""

from __future__ import annotations

import torch

from voxcpm_triton.ops import library as lib


def locdit_sequence_ref(mu_pair: torch.Tensor, time: torch.Tensor, cond: torch.Tensor,
                        x: torch.Tensor) -> torch.Tensor:
    branches, batch = mu_pair.shape[:2]
    hidden = x.shape[-1]
    prefix = (mu_pair.view(branches, batch, -1, hidden), time.view(1, 1, 1, hidden).expand(branches, batch, 1, hidden))
    shared = tuple(part.unsqueeze(0).expand(branches, *part.shape) for part in (cond, x))
    return torch.cat(prefix + shared, dim=2).view(branches * batch, -1, hidden)


@torch.library.custom_op("voxcpm::locdit_sequence", mutates_args=(),
                         schema="(Tensor mu_pair, Tensor time, Tensor cond, Tensor x) -> Tensor")
def _locdit_sequence_op(mu_pair: torch.Tensor, time: torch.Tensor, cond: torch.Tensor,
                        x: torch.Tensor) -> torch.Tensor:
    if not lib.kernel_ready(x):
        return locdit_sequence_ref(mu_pair, time, cond, x)
    batch, patch, hidden = x.shape
    mu_tokens = mu_pair.shape[-1] // hidden
    cond_tokens = cond.shape[1]
    out = x.new_empty((2 * batch, mu_tokens + 1 + cond_tokens + patch, hidden))
    with lib.device_of(x):
        error = lib.library().voxcpm_locdit_sequence(lib.ptr(mu_pair), lib.ptr(time), lib.ptr(cond), lib.ptr(x),
                                                     lib.ptr(out), batch, mu_tokens, cond_tokens, patch, hidden,
                                                     lib.dtype_code(x), lib.stream_of(x))
    lib.check(error, "locdit_sequence")
    return out


@_locdit_sequence_op.register_fake
def _(mu_pair: torch.Tensor, time: torch.Tensor, cond: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    batch, patch, hidden = x.shape
    return x.new_empty((2 * batch, mu_pair.shape[-1] // hidden + 1 + cond.shape[1] + patch, hidden))


def locdit_sequence(mu_pair: torch.Tensor, time: torch.Tensor, cond: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """[2 * batch, mu_tokens + 1 + cond_tokens + patch, hidden] from mu_pair [2, batch, mu_tokens *
    hidden] (the two branches' mu, the conditional first), time [hidden] (this step's token for every
    sequence), cond [batch, cond_tokens, hidden] and x [batch, patch, hidden]."""
    lib.require(x.dim() == 3 and x.shape[0] > 0 and x.shape[1] > 0,
                f"x must be a non-empty [batch, patch, hidden] tensor, got shape {tuple(x.shape)}")
    batch, _, hidden = x.shape
    lib.require(x.dtype in lib.KERNEL_DTYPES, f"x must be one of {lib.KERNEL_DTYPES}, got {x.dtype}")
    lib.require(mu_pair.dim() == 3 and mu_pair.shape[:2] == (2, batch) and mu_pair.shape[2] % hidden == 0,
                f"mu_pair must be [2, {batch}, mu_tokens * {hidden}], got {tuple(mu_pair.shape)}")
    lib.require(time.shape == (hidden,), f"time must be [{hidden}], got {tuple(time.shape)}")
    lib.require(cond.dim() == 3 and cond.shape[0] == batch and cond.shape[2] == hidden,
                f"cond must be [{batch}, cond_tokens, {hidden}], got {tuple(cond.shape)}")
    for name, t in (("mu_pair", mu_pair), ("time", time), ("cond", cond), ("x", x)):
        lib.require(t.dtype == x.dtype and t.device == x.device and t.is_contiguous(),
                    f"{name} must be contiguous {x.dtype} on {x.device}, got {t.dtype} on {t.device} "
                    f"strides {t.stride()}")
    return torch.ops.voxcpm.locdit_sequence(mu_pair, time, cond, x)
