"""Engine: continuous batching of VoxCPM streams.

One `step()` reads aloud: the scheduler picks (admit queued requests, drop cancelled ones), the
runner runs (prefill the admitted, decode everyone), the scheduler books (emit patches, end finished
streams). `submit` and `cancel` may be called from any thread; `step` from one thread at a time.
"""

from __future__ import annotations

import threading

import torch

from voxcpm_triton.engine.request import GenerationRequest, StepOutput
from voxcpm_triton.engine.runner import ModelRunner
from voxcpm_triton.engine.scheduler import Scheduler
from voxcpm_triton.model.voxcpm import VoxCPMModel


class Engine:
    def __init__(self, model: VoxCPMModel, max_slots: int, max_context: int, device: torch.device | str,
                 window_patches: int, max_prefill_tokens: int | None = None, cuda_graphs: bool | None = None,
                 custom_ops: bool | None = None, compile_layers: bool | None = None, fp8: bool | None = None):
        """cuda_graphs / custom_ops / compile_layers / fp8 (CUDA only; None: from the environment, see
        ModelRunner) choose how the decode step runs; the CUDA graphs for the default timesteps
        are captured here, for every batch bucket up to max_slots."""
        device = torch.device(device)
        config = model.config
        if not 1 < max_context <= config.max_length:
            raise ValueError(f"max_context must be in [2, config.max_length={config.max_length}], got {max_context}")
        param_device = model.stop_proj.weight.device
        if param_device.type != device.type or (device.index is not None and param_device.index != device.index):
            raise ValueError(f"model parameters are on {param_device}, engine device is {device}")
        self.config = config
        self.max_context = max_context
        self.scheduler = Scheduler(max_slots, max_context, window_patches, max_prefill_tokens)
        self.runner = ModelRunner(model.eval(), max_slots, max_context, device, cuda_graphs=cuda_graphs,
                                  custom_ops=custom_ops, compile_layers_=compile_layers, fp8=fp8)
        self._lock = threading.Lock()
        self._step_lock = threading.Lock()

    def submit(self, request: GenerationRequest) -> None:
        """Queue a request; it joins the batch at the next step. Raises ValueError on bad input."""
        request.validate(self.config.patch_size, self.config.feat_dim, self.config.lm.vocab_size, self.max_context)
        with self._lock:
            self.scheduler.add(request)

    def cancel(self, request_id: str) -> bool:
        """Stop a stream at the next step (it gets a final output with error 'cancelled')."""
        with self._lock:
            return self.scheduler.cancel(request_id)

    @property
    def live_slots(self) -> int:
        with self._lock:
            return len(self.scheduler.running)

    @property
    def has_work(self) -> bool:
        with self._lock:
            return self.scheduler.has_work

    def step(self) -> list[StepOutput]:
        """Advance every live stream by one patch (admitting queued requests first)."""
        with self._step_lock:
            with self._lock:
                batch, outputs = self.scheduler.schedule()
            if batch.admitted:
                try:
                    self.runner.prefill(batch.admitted)
                except Exception as exc:  # a bad prompt fails the admitted streams, not the engine
                    with self._lock:
                        outputs += self.scheduler.fail(batch.admitted, f"prefill failed: {exc}")
                    batch.running = [s for s in batch.running if s not in batch.admitted]
            if not batch.running:
                return outputs
            try:
                patches, stop = self.runner.decode(batch.running)
            except Exception as exc:
                with self._lock:
                    return outputs + self.scheduler.fail(batch.running, f"decode failed: {exc}")
            with self._lock:
                return outputs + self.scheduler.book(batch, patches, stop)
