"""Triton adapter for voxcpm_triton.audio.vocoder.WindowedVocoder: one decode call per dynamic batch.
Each request is a WINDOW whose last NEW_PATCHES patches (1 if absent) are returned as audio."""

from __future__ import annotations

import numpy as np
import triton_python_backend_utils as pb_utils

from voxcpm_triton.audio.vocoder import WindowedVocoder
from voxcpm_triton.serving import model_settings
from voxcpm_triton.serving.orphan_guard import exit_with_server, server_pid
from voxcpm_triton.serving.warm_up import warm_up_vocoder
from voxcpm_triton.serving.window_acks import AckBoard, board_path
from voxcpm_triton.serving.window_backlog import WindowCounter, counter_path


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        server = server_pid()
        exit_with_server(server)
        parameters, folder, device, loaded = model_settings.load_audio_side(args)
        # CUDA graphs cover the windows of up to this many new patches (ar_decoder's chunk_patches).
        self.vocoder = WindowedVocoder(loaded.audio_vae, loaded.config.patch_size,
                                       max_new_patches=model_settings.chunk_patches(parameters))
        warm_up_vocoder(self.vocoder)
        # Windows decoded, read by the ar_decoder's back-pressure.
        self.window_counter = WindowCounter(counter_path(server), "decoded")
        # Windows decoded per stream: a decoder ends a stream whose windows stopped arriving here.
        self.acks = AckBoard(board_path(server))
        self.sample_rate = np.array([[self.vocoder.sample_rate]], dtype=np.int32)
        pb_utils.Logger.log_info(
            f"vocoder: checkpoint {folder} on {device}, window {self.vocoder.window_patches} patches"
        )

    def execute(self, requests: list[pb_utils.InferenceRequest]) -> list[pb_utils.InferenceResponse]:
        self.window_counter.set_busy(True)  # a decoder waiting on the backlog sees the batch under way
        try:
            return self._decode(requests)
        finally:
            self.window_counter.add(len(requests))
            self.window_counter.set_busy(False)
            for request in requests:
                self.acks.ack(request.request_id())

    def _decode(self, requests):
        windows, news = [], []
        for request in requests:
            window = pb_utils.get_input_tensor_by_name(request, "WINDOW").as_numpy()
            # A request holds one window: [1, n, P, D]. Any other batch stays 4-D, which decode refuses.
            windows.append(window[0] if window.ndim == 4 and len(window) == 1 else window)
            new = pb_utils.get_input_tensor_by_name(request, "NEW_PATCHES")  # Triton checked its shape [1]
            news.append(1 if new is None else int(new.as_numpy().reshape(-1)[0]))
        try:
            chunks = self.vocoder.decode(windows, news)
        except ValueError:
            # Some window is malformed: decode one by one so each request gets its own answer.
            return [self._decode_one(window, new) for window, new in zip(windows, news)]
        return [self._response(chunk) for chunk in chunks]

    def finalize(self) -> None:
        self.window_counter.close()
        self.acks.close()

    def _decode_one(self, window, new):
        try:
            return self._response(self.vocoder.decode([window], [new])[0])
        except ValueError as exc:
            # decode names its arguments windows[i] and new_patches[i]; here they are this request's tensors.
            message = str(exc).replace("windows[0]", "WINDOW").replace("new_patches[0]", "NEW_PATCHES")
            return pb_utils.InferenceResponse(error=pb_utils.TritonError(message))

    def _response(self, chunk):
        return pb_utils.InferenceResponse(
            [pb_utils.Tensor("AUDIO", chunk[None]), pb_utils.Tensor("SAMPLE_RATE", self.sample_rate)]
        )
