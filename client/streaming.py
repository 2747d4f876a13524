"""VoxCPMClient: send text (and optionally a reference voice) to the `voxcpm` ensemble and receive
float32 PCM chunks as they are generated, over one gRPC stream per call."""

from __future__ import annotations

import numbers
import queue
import time
import uuid
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException


MODEL = "voxcpm"
DECODER = "ar_decoder"


class VoxCPMError(RuntimeError):
    """The server answered a request with an error (its message says which input and why)."""


@dataclass
class StreamStats:
    """Timings of one stream; RTF follows the common TTS definition: (wall - first chunk) / audio."""

    started: float = field(default_factory=time.perf_counter)
    first_chunk_s: float | None = None
    wall_s: float = 0.0
    samples: int = 0
    chunks: int = 0
    sample_rate: int = 0

    @property
    def audio_s(self) -> float:
        return self.samples / self.sample_rate if self.sample_rate else 0.0

    @property
    def rtf(self) -> float | None:
        if not self.audio_s or self.first_chunk_s is None:
            return None
        return (self.wall_s - self.first_chunk_s) / self.audio_s

    @property
    def wall_rtf(self) -> float | None:
        return self.wall_s / self.audio_s if self.audio_s else None


def _tensor(name: str, value: np.ndarray) -> grpcclient.InferInput:
    dtype = "BYTES" if value.dtype == object else {
        np.dtype(np.float32): "FP32", np.dtype(np.int32): "INT32", np.dtype(np.int64): "INT64",
        np.dtype(np.bool_): "BOOL",
    }[value.dtype]
    tensor = grpcclient.InferInput(name, list(value.shape), dtype)
    tensor.set_data_from_numpy(value)
    return tensor


def build_inputs(
    text: str,
    prompt_audio: np.ndarray | None = None,
    prompt_sample_rate: int | None = None,
    prompt_text: str | None = None,
    reference_audio: np.ndarray | None = None,
    reference_sample_rate: int | None = None,
    voice_id: str | None = None,
    cfg_value: float | None = None,
    timesteps: int | None = None,
    max_seconds: float | None = None,
    seed: int | None = None,
    normalize: bool | None = None,
) -> list[grpcclient.InferInput]:
    """The ensemble's input tensors; parameters left as None take the server's defaults. A value
    of the wrong type is a TypeError naming it, and one its tensor cannot hold a ValueError: sent, it
    would arrive wrapped or truncated."""
    values: dict[str, np.ndarray] = {"TEXT": _string("text", text)}
    if prompt_audio is not None:
        values["PROMPT_AUDIO"] = _mono("prompt_audio", prompt_audio)
    if prompt_sample_rate is not None:
        values["PROMPT_SAMPLE_RATE"] = _integer("prompt_sample_rate", prompt_sample_rate, np.int32)
    if prompt_text is not None:
        values["PROMPT_TEXT"] = _string("prompt_text", prompt_text)
    if reference_audio is not None:
        values["REFERENCE_AUDIO"] = _mono("reference_audio", reference_audio)
    if reference_sample_rate is not None:
        values["REFERENCE_SAMPLE_RATE"] = _integer("reference_sample_rate", reference_sample_rate, np.int32)
    if voice_id is not None:
        values["VOICE_ID"] = _string("voice_id", voice_id)
    if cfg_value is not None:
        values["CFG_VALUE"] = _real("cfg_value", cfg_value)
    if timesteps is not None:
        values["TIMESTEPS"] = _integer("timesteps", timesteps, np.int32)
    if max_seconds is not None:
        values["MAX_SECONDS"] = _real("max_seconds", max_seconds)
    if seed is not None:
        values["SEED"] = _integer("seed", seed, np.int64)
    if normalize is not None:
        values["NORMALIZE"] = np.array([bool(normalize)], dtype=np.bool_)
    return [_tensor(name, value) for name, value in values.items()]


def _string(name: str, value: object) -> np.ndarray:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    return np.array([value.encode("utf-8")], dtype=object)


def _integer(name: str, value: object, dtype: type[np.integer]) -> np.ndarray:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    limits = np.iinfo(dtype)
    if not limits.min <= value <= limits.max:
        raise ValueError(f"{name}={value} does not fit the server's {np.dtype(dtype).name} tensor")
    return np.array([value], dtype=dtype)


def _real(name: str, value: object) -> np.ndarray:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {value!r}")
    return np.array([value], dtype=np.float32)


def _mono(name: str, audio: object) -> np.ndarray:
    """Samples as one float32 vector; several channels would arrive interleaved as one."""
    samples = np.asarray(audio, dtype=np.float32)
    if sum(size > 1 for size in samples.shape) > 1:
        raise ValueError(f"{name} has shape {samples.shape}: send mono samples (average the channels)")
    return np.ascontiguousarray(samples).reshape(-1)


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def connect(url: str) -> grpcclient.InferenceServerClient:
    """A gRPC client for `url` with tritonclient's own channel settings (messages of any size,
    keepalive); to a server on this machine it never goes through an HTTP proxy, which a machine
    that reaches its package index through one may have set for every address (http_proxy without a
    no_proxy for loopback)."""
    host = url.rpartition(":")[0] or url
    if host not in LOOPBACK_HOSTS:
        return grpcclient.InferenceServerClient(url)
    keepalive = grpcclient.KeepAliveOptions()
    return grpcclient.InferenceServerClient(url, channel_args=[
        ("grpc.max_send_message_length", grpcclient.MAX_GRPC_MESSAGE_SIZE),
        ("grpc.max_receive_message_length", grpcclient.MAX_GRPC_MESSAGE_SIZE),
        ("grpc.keepalive_time_ms", keepalive.keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", keepalive.keepalive_timeout_ms),
        ("grpc.keepalive_permit_without_calls", keepalive.keepalive_permit_without_calls),
        ("grpc.http2.max_pings_without_data", keepalive.http2_max_pings_without_data),
        ("grpc.enable_http_proxy", 0),
    ])


def _first_error(replies: queue.Queue, raised: InferenceServerException) -> str:
    """Why a stream could not start: the error its callback got (the connection's), which the one
    raised only points to, if it comes within a second."""
    try:
        _, error = replies.get(timeout=1.0)
    except queue.Empty:
        error = None
    return (error if isinstance(error, InferenceServerException) else raised).message()


class VoxCPMClient:
    """`url` is the server's gRPC address (host:port). One client may run one stream at a time;
    use one client per concurrent stream."""

    def __init__(self, url: str = "127.0.0.1:8001", model: str = MODEL, timeout_s: float = 120.0,
                 decoder: str = DECODER) -> None:
        if not isinstance(url, str) or not url:
            raise TypeError(f"url must be a 'host:port' string, got {url!r}")
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, numbers.Real) or not timeout_s > 0:
            raise ValueError(f"timeout_s must be a number of seconds > 0, got {timeout_s!r}")
        self.url = url
        self.model = model
        self.decoder = decoder
        self.timeout_s = timeout_s

    def stream_inputs(self, inputs: list[grpcclient.InferInput], stats: StreamStats | None = None) -> Iterator[np.ndarray]:
        """Yield PCM chunks for prepared input tensors until the server's final response.

        Closing the generator early (break, an exception, Ctrl-C) cancels the request on the
        server: see _end_early."""
        stats = stats if stats is not None else StreamStats()
        replies: queue.Queue = queue.Queue()
        client = connect(self.url)
        request_id = uuid.uuid4().hex
        finished = False
        try:
            try:
                client.start_stream(callback=lambda result, error: replies.put((result, error)))
                stats.started = time.perf_counter()
                client.async_stream_infer(self.model, inputs, request_id=request_id, enable_empty_final_response=True)
            except InferenceServerException as exc:  # e.g. nothing listens at the address
                finished = True
                raise VoxCPMError(f"could not stream from {self.url}: {_first_error(replies, exc)}") from None
            while True:
                try:
                    result, error = replies.get(timeout=self.timeout_s)
                except queue.Empty:
                    raise VoxCPMError(f"no response from {self.url} for {self.timeout_s:.0f} s") from None
                if error is not None:
                    finished = True
                    raise VoxCPMError(error.message() if isinstance(error, InferenceServerException) else str(error))
                final = result.get_response().parameters["triton_final_response"].bool_param
                audio = result.as_numpy("AUDIO")
                if audio is not None and audio.size:
                    now = time.perf_counter()
                    if stats.first_chunk_s is None:
                        stats.first_chunk_s = now - stats.started
                    rate = result.as_numpy("SAMPLE_RATE")
                    if rate is not None:
                        stats.sample_rate = int(rate.reshape(-1)[0])
                    stats.samples += audio.size
                    stats.chunks += 1
                    stats.wall_s = now - stats.started
                    yield audio.reshape(-1)
                if final:
                    finished = True
                    stats.wall_s = time.perf_counter() - stats.started
                    return
        finally:
            try:
                if not finished:
                    finished = self._end_early(client, replies, request_id)
            finally:
                # gRPC cancellation is the fallback when the decoder could not be asked.
                try:
                    client.stop_stream(cancel_requests=not finished)
                finally:
                    client.close()

    def _end_early(self, client: grpcclient.InferenceServerClient, replies: queue.Queue, request_id: str) -> bool:
        """Ask the decoder to end stream `request_id` and wait for its final response.

        Triton 2.51 passes an ensemble's gRPC cancellation only to steps not yet started, so the
        decoder would run the stream to its end; a CANCEL_ID request naming the stream ends it at
        once and lets the ensemble finish normally. True when the final response arrived."""
        cancel = grpcclient.InferInput("CANCEL_ID", [1, 1], "BYTES")
        cancel.set_data_from_numpy(np.array([[request_id.encode()]], dtype=object))
        try:
            client.async_stream_infer(self.decoder, [cancel], request_id=f"{request_id}-cancel",
                                      enable_empty_final_response=True)
        except InferenceServerException:
            return False
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline:
            try:
                result, error = replies.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return False
            if error is not None:
                # The stream's own error ends it: nothing left to free. Any other error (the cancel
                # refused, the decoder's process or the server gone) means no final is coming
                # either: a CANCEL_ID naming no live stream is answered without an error.
                return f"[request id: {request_id}]" in str(error)
            response = result.get_response()
            if response.id == request_id and response.parameters["triton_final_response"].bool_param:
                return True
        return False

    def stream(self, text: str, stats: StreamStats | None = None, **options) -> Iterator[np.ndarray]:
        """Yield PCM chunks for `text`; options are build_inputs' keyword arguments."""
        return self.stream_inputs(build_inputs(text, **options), stats)

    def synthesize(self, text: str, **options) -> tuple[np.ndarray, int, StreamStats]:
        """The whole utterance: (audio, sample_rate, stats)."""
        stats = StreamStats()
        chunks = list(self.stream(text, stats, **options))
        audio = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
        return audio, stats.sample_rate, stats

    def register_voice(
        self, voice_id: str, prompt_audio: np.ndarray | None = None, prompt_sample_rate: int | None = None,
        prompt_text: str | None = None, reference_audio: np.ndarray | None = None,
        reference_sample_rate: int | None = None,
    ) -> None:
        """Encode a voice once on the server; later calls pass voice_id=... alone. The voice is what
        the arguments make it: a prompt to continue (prompt audio with its text), a VoxCPM2
        reference voice (reference audio, or prompt audio without text), or both. The server
        registers a voice as part of a synthesis, so this asks for the shortest one (of one word:
        the prompt's own text would count twice against the model's length)."""
        for _ in self.stream(
            "hello",
            prompt_audio=prompt_audio,
            prompt_sample_rate=prompt_sample_rate,
            prompt_text=prompt_text,
            reference_audio=reference_audio,
            reference_sample_rate=reference_sample_rate,
            voice_id=voice_id,
            max_seconds=0.1,
        ):
            pass
