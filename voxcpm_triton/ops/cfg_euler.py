"""CFG-zero-star guidance + one Euler step of the flow-matching solver: CUDA op and reference.

Per stream b: st = <v_cond, v_uncond> / (|v_uncond|^2 + 1e-8); v = v_uncond * st + cfg * (v_cond -
v_uncond * st); x -= dt * v. The same arithmetic as UnifiedCFM.solve_euler of the reference, done in
fp32 (the reference rounds every intermediate to the model dtype). cfg and dt are per-stream tensors
so a captured graph serves streams with different guidance values and schedules.
"""

from __future__ import annotations

import torch

from voxcpm_triton.ops import library as lib


def cfg_euler_step_ref(x: torch.Tensor, v_cond: torch.Tensor, v_uncond: torch.Tensor, cfg: torch.Tensor,
                       dt: torch.Tensor) -> None:
    cond = v_cond.float().flatten(1)
    uncond = v_uncond.float().flatten(1)
    st = (cond * uncond).sum(dim=1, keepdim=True) / ((uncond * uncond).sum(dim=1, keepdim=True) + 1e-8)
    guided_uncond = uncond * st
    v = guided_uncond + cfg.float()[:, None] * (cond - guided_uncond)
    x.copy_((x.float().flatten(1) - dt.float()[:, None] * v).view(x.shape))


@torch.library.custom_op(
    "voxcpm::cfg_euler_step", mutates_args=("x",),
    schema="(Tensor(a!) x, Tensor v_cond, Tensor v_uncond, Tensor cfg, Tensor dt) -> ()")
def _cfg_euler_op(x: torch.Tensor, v_cond: torch.Tensor, v_uncond: torch.Tensor, cfg: torch.Tensor,
                  dt: torch.Tensor) -> None:
    if not lib.kernel_ready(x):
        cfg_euler_step_ref(x, v_cond, v_uncond, cfg, dt)
        return
    batch = x.shape[0]
    with lib.device_of(x):
        error = lib.library().voxcpm_cfg_euler(lib.ptr(x), lib.ptr(v_cond), lib.ptr(v_uncond), lib.ptr(cfg),
                                               lib.ptr(dt), batch, x.numel() // max(batch, 1),
                                               lib.dtype_code(x), lib.stream_of(x))
    lib.check(error, "cfg_euler_step")


@_cfg_euler_op.register_fake
def _(x: torch.Tensor, v_cond: torch.Tensor, v_uncond: torch.Tensor, cfg: torch.Tensor, dt: torch.Tensor) -> None:
    return None


def cfg_euler_step(x: torch.Tensor, v_cond: torch.Tensor, v_uncond: torch.Tensor, cfg: torch.Tensor,
                   dt: torch.Tensor) -> None:
    """Updates x [B, ...] in place from the conditional / unconditional velocities [B, ...];
    cfg, dt: float32 [B]."""
    lib.require(x.dim() >= 2 and x.is_contiguous() and x.numel() > 0,
                f"x must be a contiguous, non-empty [B, ...] tensor, got shape {tuple(x.shape)}")
    for name, t in (("v_cond", v_cond), ("v_uncond", v_uncond)):
        lib.require(t.shape == x.shape and t.dtype == x.dtype and t.device == x.device and t.is_contiguous(),
                    f"{name} must be contiguous {tuple(x.shape)} {x.dtype} on {x.device}, got "
                    f"{tuple(t.shape)} {t.dtype} on {t.device}")
    for name, t in (("cfg", cfg), ("dt", dt)):
        lib.require(t.shape == (x.shape[0],) and t.dtype == torch.float32 and t.device == x.device
                    and t.is_contiguous(),
                    f"{name} must be float32 [{x.shape[0]}] on {x.device}, got {tuple(t.shape)} {t.dtype} "
                    f"on {t.device}")
    torch.ops.voxcpm.cfg_euler_step(x, v_cond, v_uncond, cfg, dt)
