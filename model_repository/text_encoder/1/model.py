"""Triton adapter for voxcpm_triton.serving.text_encoding: decode tensors, call, encode tensors."""

from __future__ import annotations

import traceback

import triton_python_backend_utils as pb_utils

from voxcpm_triton.frontend import Frontend
from voxcpm_triton.serving import model_settings
from voxcpm_triton.serving.orphan_guard import exit_with_server, server_pid
from voxcpm_triton.serving.text_encoding import TextEncoding
from voxcpm_triton.serving.window_acks import AckBoard, board_path
from voxcpm_triton.voice_cache import VoiceCache, latent_space_key, voices_folder


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        server = server_pid()
        exit_with_server(server)
        parameters, folder, device, loaded = model_settings.load_audio_side(args)
        vae = loaded.audio_vae
        seconds_per_patch = loaded.config.patch_size * vae.decode_hop_length / vae.sample_rate
        capacity = model_settings.int_parameter(parameters, "voice_cache_size", 1024, 1, 1_000_000)
        # Shared by this server's text_encoder instances.
        # The server's own tmpfs folder goes with its last instance; one a setting names outlives it.
        voice_folder = model_settings.voice_folder(parameters, args["model_repository"], server)
        voices = VoiceCache(voice_folder, capacity, owned=voice_folder == voices_folder(server),
                            latent_space=latent_space_key(vae))
        self.encoding = TextEncoding(Frontend(loaded), voices, seconds_per_patch)
        # Marks each prepared request as one whose windows a vocoder will acknowledge (window_acks).
        self.acks = AckBoard(board_path(server))
        pb_utils.Logger.log_info(f"text_encoder: checkpoint {folder} on {device}, voices in {voice_folder}")

    def execute(self, requests: list[pb_utils.InferenceRequest]) -> list[pb_utils.InferenceResponse]:
        return [self._respond(request) for request in requests]

    def finalize(self) -> None:
        self.encoding.voices.close()
        self.acks.close()

    def _respond(self, request):
        def get(name):
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            return None if tensor is None else tensor.as_numpy()

        try:
            arrays = self.encoding.prepare(get)
        except ValueError as exc:
            return pb_utils.InferenceResponse(error=pb_utils.TritonError(str(exc)))
        except Exception as exc:
            # Raised out of execute, it would fail every request batched with this one.
            pb_utils.Logger.log_error(f"text_encoder: {traceback.format_exc()}")
            return pb_utils.InferenceResponse(
                error=pb_utils.TritonError(f"text_encoder could not prepare this request: {type(exc).__name__}: {exc}")
            )
        self.acks.track(request.request_id())
        return pb_utils.InferenceResponse([pb_utils.Tensor(name, value) for name, value in arrays.items()])
