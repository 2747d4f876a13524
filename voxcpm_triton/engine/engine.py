"""Engine: continuous batching of VoxCPM streams.

One `step()` reads aloud: the scheduler picks (admit queued requests, drop cancelled ones), the
runner runs (prefill the admitted, launch everyone's decode step), the scheduler books (emit
patches, end finished streams). `submit` and `cancel` may be called from any thread; `step` from one
thread at a time.

With launch_ahead (opt-in: VOXCPM_LAUNCH_AHEAD=1 on CUDA) a step books the decode step launched by
the call before, after launching its own, so the GPU starts step n+1 while the host reads and books
step n. The price: a stream whose stop head fires runs one step more, which is dropped; the
scheduler never launches a step past a stream's budget, and a slot is reused only after the steps
that wrote it, in GPU stream order. Measured on the H200 (perf/RESULTS.md runs 29-30): the decoder
step alone is 3.5-4.5% shorter at 1-16 streams and 1.8% at 64; served through Triton, throughput
rose 8-11% at 1-16 streams but fell 16% at 64, where the decoder that never idles leaves the
time-sliced vocoder's process less of the GPU. Hence off by default. Under CUDA MPS the two
processes' kernels run side by side and it served 17-20% more audio at 1-64 streams (run 76), so
build/tritonserver.sh turns it on there.
"""

from __future__ import annotations

import os
import threading

import torch

from voxcpm_triton.engine.pending_step import PendingStep
from voxcpm_triton.engine.request import GenerationRequest, StepOutput
from voxcpm_triton.engine.runner import ModelRunner
from voxcpm_triton.engine.scheduler import Batch, Scheduler
from voxcpm_triton.model.voxcpm import VoxCPMModel


class Engine:
    def __init__(self, model: VoxCPMModel, max_slots: int, max_context: int, device: torch.device | str,
                 window_patches: int, max_prefill_tokens: int | None = None, cuda_graphs: bool | None = None,
                 custom_ops: bool | None = None, compile_layers: bool | None = None, fp8: bool | None = None,
                 launch_ahead: bool | None = None):
        """cuda_graphs / custom_ops / compile_layers / fp8 (CUDA only; None: from the environment, see
        ModelRunner) choose how the decode step runs; the CUDA graphs for the default timesteps
        are captured here, for every batch bucket up to max_slots. launch_ahead (None: on CUDA when
        VOXCPM_LAUNCH_AHEAD=1): step() returns the outputs of the decode step launched by the call
        before (see the module docstring); off, those of its own."""
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
        if launch_ahead is None:
            launch_ahead = device.type == "cuda" and os.environ.get("VOXCPM_LAUNCH_AHEAD", "0") == "1"
        self.launch_ahead = launch_ahead
        self._in_flight: tuple[Batch, PendingStep] | None = None  # launched, not yet booked
        self._lock = threading.Lock()
        self._step_lock = threading.Lock()

    def check(self, request: GenerationRequest) -> None:
        """Raise ValueError if this engine cannot run `request`, naming the field."""
        request.validate(self.config.patch_size, self.config.feat_dim, self.config.lm.vocab_size, self.max_context)

    def submit(self, request: GenerationRequest) -> None:
        """Queue a request; it joins the batch at the next step. Raises ValueError on bad input."""
        self.check(request)
        with self._lock:
            self.scheduler.add(request)

    def cancel(self, request_id: str) -> bool:
        """Stop a stream at the next step (it gets a final output with error 'cancelled')."""
        with self._lock:
            return self.scheduler.cancel(request_id)

    @property
    def window_patches(self) -> int:
        """Patches in a full vocoder window (left context + the new one) of the outputs."""
        return self.scheduler.window_patches

    @property
    def live_slots(self) -> int:
        with self._lock:
            return len(self.scheduler.running)

    @property
    def has_work(self) -> bool:
        with self._lock:
            return self.scheduler.has_work or self._in_flight is not None

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
            launched = None
            if batch.running:
                try:
                    launched = batch, self.runner.launch(batch.running)
                except Exception as exc:
                    with self._lock:
                        outputs += self.scheduler.fail(batch.running, f"decode failed: {exc}")
            previous, self._in_flight = self._in_flight, launched
            if previous is not None:
                outputs += self._book(*previous)
            if not self.launch_ahead and self._in_flight is not None:
                outputs += self._book(*self._in_flight)
                self._in_flight = None
            return outputs

    def _book(self, batch: Batch, pending: PendingStep) -> list[StepOutput]:
        """Read a launched step's output and book it (a failed read fails its streams)."""
        try:
            patches, stop = pending.result()
        except Exception as exc:
            with self._lock:
                return self.scheduler.fail(batch.running, f"decode failed: {exc}")
        with self._lock:
            return self.scheduler.book(batch, patches, stop)
