"""Triton adapter for the continuous-batching engine: execute() checks each request and hands it,
with its response sender, to the EngineLoop thread this model owns (joined in finalize)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import triton_python_backend_utils as pb_utils

from voxcpm_triton.audio.vocoder import window_patches as vocoder_window_patches
from voxcpm_triton.checkpoint.loader import load_checkpoint
from voxcpm_triton.engine.engine import Engine
from voxcpm_triton.serving import inputs, model_settings
from voxcpm_triton.serving.cancel_board import CancelBoard, board_folder
from voxcpm_triton.serving.engine_loop import EngineLoop
from voxcpm_triton.serving.first_window_gate import FirstWindowGate
from voxcpm_triton.serving.orphan_guard import exit_with_server, server_pid
from voxcpm_triton.serving.request_tensors import WIRE_DTYPES, from_wire
from voxcpm_triton.serving.step_meter import COUNTERS, StepMeter, StepTotals
from voxcpm_triton.serving.stream_ids import new_stream_id, request_id_of
from voxcpm_triton.serving.window_acks import AckBoard, StreamWatch, board_path
from voxcpm_triton.serving.window_backlog import BacklogGate, WindowCounter, counter_path
from voxcpm_triton.serving.warm_up import warm_up_engine

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class _ResponseSink:
    """One stream's response sender; a failed send (client gone) must not stop the engine loop."""

    def __init__(self, sender, counter, watch=None):
        self.sender = sender
        self.counter = counter  # windows sent, for the vocoder back-pressure
        self.watch = watch  # whether the ensemble still takes this stream's windows (window_acks)

    def _send(self, response=None, flags=0):
        try:
            if response is None:
                self.sender.send(flags=flags)
            else:
                self.sender.send(response, flags=flags)
        except Exception as exc:
            pb_utils.Logger.log_warn(f"ar_decoder: could not send a response: {exc}")

    def send_window(self, window: np.ndarray, new_patches: int) -> None:
        tensors = [pb_utils.Tensor("WINDOW", window[None]),
                   pb_utils.Tensor("NEW_PATCHES", np.array([[new_patches]], dtype=np.int32))]
        if self.watch is not None:
            self.watch.sent()  # before the send: the first one opens the stream's cell on the board
        self._send(pb_utils.InferenceResponse(tensors))
        self.counter.add(1)

    def finish(self) -> None:
        self._send(flags=FINAL)
        self._ended()

    def fail(self, message: str) -> None:
        self._send(pb_utils.InferenceResponse(error=pb_utils.TritonError(message)), flags=FINAL)
        self._ended()

    def _ended(self):
        if self.watch is not None:
            self.watch.ended()

    def is_cancelled(self) -> bool:
        if self.sender.is_cancelled():
            return True
        if self.watch is not None and self.watch.abandoned():
            # The client vanished or cancelled over gRPC: the ensemble no longer forwards windows.
            pb_utils.Logger.log_info(
                f"ar_decoder: ending stream '{self.watch.request_id}': {self.watch.windows_sent} windows sent, "
                "none decoded for a while (client gone)"
            )
            return True
        return False


class _StepCounters:
    """The engine thread's time as Triton custom metrics (port 8002, next to nv_inference_*)."""

    def __init__(self, labels):
        self.families = []  # kept: a dropped family unregisters its metrics
        self.counters = []
        for name, field, description in COUNTERS:
            family = pb_utils.MetricFamily(name=name, description=description, kind=pb_utils.MetricFamily.COUNTER)
            self.families.append(family)
            self.counters.append((family.Metric(labels=labels), field))

    def publish(self, totals: StepTotals) -> None:
        for counter, field in self.counters:
            value = getattr(totals, field)
            if value:
                counter.increment(value)


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        server = server_pid()
        exit_with_server(server)
        model_config = json.loads(args["model_config"])
        if not pb_utils.using_decoupled_model_transaction_policy(model_config):
            raise pb_utils.TritonModelException("ar_decoder streams many responses per request: set decoupled: true")
        parameters = model_settings.string_parameters(model_config)
        model_settings.apply_torch_threads(parameters)
        model_settings.apply_mps_priority(parameters)
        model_settings.apply_lt_cache(parameters, args["model_repository"])
        folder = model_settings.checkpoint_folder(parameters, args["model_repository"])
        device = model_settings.instance_device(args)
        dtype = model_settings.torch_dtype(parameters)
        lora = model_settings.lora_folder(parameters, args["model_repository"])
        # Every setting is read before anything is loaded or any shared board claimed, so a bad one
        # fails the load early and leaves nothing behind.
        windows_ahead = model_settings.int_parameter(parameters, "windows_ahead", 2, 0, 1 << 20)
        first_window_wait_ms = model_settings.int_parameter(parameters, "first_window_wait_ms", 0, 0, 1000)
        first_window_streams = model_settings.int_parameter(parameters, "first_window_streams", 4, 1, 1 << 20)
        chunk_patches = model_settings.chunk_patches(parameters)
        max_slots = model_settings.int_parameter(parameters, "max_slots", 64, 1, 4096)
        max_context = model_settings.int_parameter(parameters, "max_context", 4096, 16, 1 << 20)
        fp8 = model_settings.int_parameter(parameters, "fp8_locdit", 0, 0, 1) == 1
        loaded = load_checkpoint(folder, dtype=dtype, device=device, lora=lora)
        window_patches = vocoder_window_patches(loaded.audio_vae, loaded.config.patch_size)
        # max_context is a cap: a checkpoint's own max_length (tiny ones: 512) may be smaller.
        engine = Engine(loaded.model, max_slots=max_slots, max_context=min(max_context, loaded.config.max_length),
                        device=device, window_patches=window_patches, fp8=fp8)
        warm_up_engine(engine)
        family = pb_utils.MetricFamily(
            name="voxcpm_live_slots",
            description="Engine slots held by live streams (0 when idle: no leaked slots)",
            kind=pb_utils.MetricFamily.GAUGE,
        )
        labels = {"model": args["model_name"], "instance": args["model_instance_name"]}
        self.slot_gauge = family.Metric(labels=labels)
        self.slot_family = family  # kept: a dropped family unregisters its metrics
        self.slot_gauge.set(0)
        self.step_counters = _StepCounters(labels)
        self.ids = itertools.count()
        # Shared by this server's ar_decoder instances: a CANCEL_ID may reach any of them.
        self.board = CancelBoard(board_folder(server))
        self.window_counter = WindowCounter(counter_path(server), "sent")
        self.acks = AckBoard(board_path(server))
        gate = BacklogGate(self.window_counter, windows_ahead).wait if windows_ahead else None
        first_windows = None
        if first_window_wait_ms:
            first_windows = FirstWindowGate(self.acks, first_window_wait_ms / 1000.0, first_window_streams).wait
        self.loop = EngineLoop(
            engine, on_live_slots=self._report_slots, cancel_source=self._posted_cancels, before_step=gate,
            after_first_patches=first_windows, chunk_patches=chunk_patches,
            meter=StepMeter(self.step_counters.publish),
        )
        self.loop.start()
        adapter = f", LoRA adapter {lora} merged" if lora is not None else ""
        folded = engine.runner.folded_bytes
        copies = f", folded weight copies {folded / 2**30:.2f} GiB" if folded else ""
        pb_utils.Logger.log_info(
            f"ar_decoder: checkpoint {folder}{adapter} on {device} ({dtype}), window {window_patches}{copies}"
        )

    def _report_slots(self, count):
        # Called by the engine loop only when the count changes. The back-pressure gate posts the
        # live streams before each step, so this posts only an instance going idle, whose last count
        # would otherwise keep loosening the other instances' gates (its slots count no queued stream,
        # and would swing the gate's figure within a step).
        self.slot_gauge.set(count)
        if count == 0:
            self.window_counter.set_live(0)
        pb_utils.Logger.log_verbose(f"ar_decoder: live slots {count}")

    def execute(self, requests: list[pb_utils.InferenceRequest]) -> None:
        for request in requests:
            cancel_id = pb_utils.get_input_tensor_by_name(request, "CANCEL_ID")
            if cancel_id is not None:
                sink = _ResponseSink(request.get_response_sender(), self.window_counter)
                beside = [name for name in WIRE_DTYPES if pb_utils.get_input_tensor_by_name(request, name) is not None]
                if beside:  # neither a cancel nor a stream can be what was meant
                    sink.fail(f"CANCEL_ID comes alone (it ends a stream); this request also holds {', '.join(beside)}")
                else:
                    self._cancel(cancel_id.as_numpy(), sink)
                continue
            sink = _ResponseSink(request.get_response_sender(), self.window_counter,
                                 StreamWatch(self.acks, request.request_id()))
            arrays = {}
            for name in WIRE_DTYPES:
                tensor = pb_utils.get_input_tensor_by_name(request, name)
                arrays[name] = None if tensor is None else tensor.as_numpy()
            stream_id = new_stream_id(request.request_id(), next(self.ids))
            try:
                generation = from_wire(arrays, stream_id)
            except ValueError as exc:
                sink.fail(str(exc))
                continue
            self.loop.submit(generation, sink)
        return None

    def _cancel(self, cancel_id, sink):
        """End the live streams whose Triton request id is CANCEL_ID (the id an ensemble request
        passes on to this step), here or, through the board, in another instance."""
        try:
            client_id = inputs.text("CANCEL_ID", cancel_id)
        except ValueError as exc:
            sink.fail(str(exc))
            return
        if not client_id:
            sink.fail("CANCEL_ID is empty; send the request id of the stream to end")
            return
        streams = [sid for sid in self.loop.stream_ids() if request_id_of(sid) == client_id]
        if streams:
            self.loop.cancel(streams)
        else:
            self.board.post(client_id)
        sink.finish()

    def _posted_cancels(self, stream_ids):
        by_client = {}
        for stream_id in stream_ids:
            by_client.setdefault(request_id_of(stream_id), []).append(stream_id)
        taken = self.board.take([client_id for client_id in by_client if client_id])
        return [stream_id for client_id in taken for stream_id in by_client[client_id]]

    def finalize(self) -> None:
        self.loop.stop()
        self.window_counter.close()
        self.acks.close()
        self.board.close()
