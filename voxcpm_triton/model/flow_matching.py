"""Flow-matching sampler: Euler integration from noise (t=1) to data (t=0) with classifier-free
guidance and CFG-zero-star (the first steps' velocity is zero, and the unconditional branch is
rescaled by its optimal projection onto the conditional one).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from voxcpm_triton import ops
from voxcpm_triton.model.local_dit import LocalDiT

SWAY_SAMPLING_COEF = 1.0
ZERO_INIT_FRACTION = 0.04


def euler_schedule(n_timesteps: int, dtype: torch.dtype, device: torch.device | str) -> tuple[torch.Tensor, torch.Tensor]:
    """Times t_k and step sizes dt_k ([n_timesteps] each) in `dtype`.

    Built with the reference's arithmetic (sway-sampled span, t advanced by subtracting dt) so that
    low-precision runs round the same way.
    """
    if n_timesteps < 1:
        raise ValueError(f"inference timesteps must be >= 1, got {n_timesteps}")
    span = torch.linspace(1, 0, n_timesteps + 1, device=device, dtype=dtype)
    span = span + SWAY_SAMPLING_COEF * (torch.cos(torch.pi / 2 * span) - 1 + span)
    times, steps = [], []
    t, dt = span[0], span[0] - span[1]
    for step in range(1, n_timesteps + 1):
        times.append(t)
        steps.append(dt)
        t = t - dt
        if step < n_timesteps:
            dt = t - span[step + 1]
    return torch.stack(times), torch.stack(steps)


def zero_init_steps(n_timesteps: int) -> int:
    return max(1, int((n_timesteps + 1) * ZERO_INIT_FRACTION))


def cfg_zero_star(conditional: torch.Tensor, unconditional: torch.Tensor, cfg_value: torch.Tensor) -> torch.Tensor:
    """Guided velocity; tensors [N, ...], cfg_value broadcastable ([N, 1, 1])."""
    flat_c = conditional.reshape(conditional.shape[0], -1)
    flat_u = unconditional.reshape(unconditional.shape[0], -1)
    scale = (flat_c * flat_u).sum(dim=1, keepdim=True) / ((flat_u ** 2).sum(dim=1, keepdim=True) + 1e-8)
    scale = scale.view(-1, *([1] * (conditional.dim() - 1)))
    return unconditional * scale + cfg_value * (conditional - unconditional * scale)


class FlowMatching(nn.Module):
    """Holds the LocDiT estimator (checkpoint prefix `feat_decoder.estimator.`)."""

    def __init__(self, estimator: LocalDiT, mean_mode: bool):
        super().__init__()
        self.estimator = estimator
        self.mean_mode = mean_mode
        self.use_op = False  # fast_path.enable_custom_ops: CFG-zero-star + Euler update as one op
        self._schedules: dict[tuple, tuple[torch.Tensor, torch.Tensor]] = {}
        self._euler_constants: dict[tuple, tuple[tuple, torch.Tensor, torch.Tensor]] = {}

    def schedule(self, n_timesteps: int, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """euler_schedule, built once per (timesteps, dtype, device): its ~40 tiny ops would
        otherwise run every step."""
        key = (n_timesteps, dtype, device)
        if key not in self._schedules:
            self._schedules[key] = euler_schedule(n_timesteps, dtype, device)
        return self._schedules[key]

    def sample(self, noise: torch.Tensor, mu: torch.Tensor, cond: torch.Tensor, n_timesteps: int,
               cfg_value: torch.Tensor) -> torch.Tensor:
        """noise [N, P, D], mu [N, mu_width], cond [N, Pc, D], cfg_value [N] -> patch [N, P, D].

        Both guidance branches run as one estimator batch of 2N (conditional rows first, then the
        same rows with mu zeroed).
        """
        times, steps = self.schedule(n_timesteps, mu.dtype, mu.device)
        if self.use_op:
            return self._sample_fused(noise, mu, cond, times, steps, cfg_value)
        batch = noise.shape[0]
        x = noise
        mu_in = torch.cat((mu, torch.zeros_like(mu)), dim=0)
        cond_in = torch.cat((cond, cond), dim=0)
        guidance = cfg_value.to(mu.dtype).view(batch, 1, 1)
        for step in range(zero_init_steps(n_timesteps), n_timesteps):
            t_in = times[step].expand(2 * batch)
            dt_in = steps[step].expand(2 * batch) if self.mean_mode else torch.zeros_like(t_in)
            velocity = self.estimator(torch.cat((x, x), dim=0), mu_in, t_in, cond_in, dt_in)
            x = x - steps[step] * cfg_zero_star(velocity[:batch], velocity[batch:], guidance)
        return x

    def _sample_fused(self, noise: torch.Tensor, mu: torch.Tensor, cond: torch.Tensor, times: torch.Tensor,
                      steps: torch.Tensor, cfg_value: torch.Tensor) -> torch.Tensor:
        """sample() on the cfg_euler_step op, with what does not change over the Euler steps (the
        projected condition, every step's time token, the branches' mu) computed once."""
        n_timesteps, batch = times.shape[0], noise.shape[0]
        x = noise.clone(memory_format=torch.contiguous_format)  # updated in place by cfg_euler_step
        guidance = cfg_value.float().contiguous()
        time_tokens, step_sizes = self._constants(times, steps, batch, mu.dtype)
        first = zero_init_steps(n_timesteps)
        cond_embed = self.estimator.cond_proj(cond)
        mu_pair = torch.stack((mu, torch.zeros_like(mu)))
        for row, step in enumerate(range(first, n_timesteps)):
            velocity = self.estimator.guided_velocity(x, mu_pair, time_tokens[row], cond_embed)
            ops.cfg_euler_step(x, velocity[:batch], velocity[batch:], guidance, step_sizes[step])
        return x

    def _constants(self, times: torch.Tensor, steps: torch.Tensor, batch: int,
                   dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The fused loop's time tokens [steps after the zero-init ones, hidden] and step sizes
        float32 [timesteps, batch], built once per (timesteps, batch, dtype, device) while the time
        MLPs' weights stay the same tensors, unchanged. They depend on nothing else, and inside the
        step's CUDA graph they were ~30 kernels a step, four of them GEMMs (perf/RESULTS.md run 89)."""
        estimator = self.estimator
        # An inference tensor has no version counter; it cannot be updated outside inference mode.
        weights = tuple((p.data_ptr(), 0 if p.is_inference() else p._version)
                        for mlp in (estimator.time_mlp, estimator.delta_time_mlp) for p in mlp.parameters())
        key = (times.shape[0], batch, dtype, times.device)
        cached = self._euler_constants.get(key)
        if cached is None or cached[0] != weights:
            first = zero_init_steps(times.shape[0])
            dts = steps[first:] if self.mean_mode else torch.zeros_like(times[first:])
            step_sizes = steps.float()[:, None].expand(times.shape[0], batch).contiguous()
            cached = self._euler_constants[key] = (weights, estimator.time_token(times[first:], dts, dtype), step_sizes)
        return cached[1], cached[2]
