"""Client cancellation mid-stream frees the decoder's slot.

A request sent to ar_decoder itself sees a gRPC cancellation at once (response_sender.is_cancelled()).
Through the voxcpm ensemble, Triton 2.51 only cancels the ensemble's *next* step requests, not the
decoder request already streaming, so the client library ends a stream it stops reading with a
CANCEL_ID request to ar_decoder naming the stream's request id; the ensemble then finishes normally.
(A plain gRPC cancel is seen only when the stream's windows stop reaching the vocoder, seconds
later: test_client_vanished.py. Triton 2.51 keeps counting such an ensemble request as in flight,
so a server stop then waits out --exit-timeout-secs.)"""

import queue
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from client.streaming import VoxCPMClient
from voxcpm_triton.serving.request_tensors import WIRE_DTYPES

pytestmark = pytest.mark.server

TRITON_DTYPES = {np.int64: "INT64", np.int32: "INT32", np.float32: "FP32"}


def _decoder_inputs(url: str, text: str, length: int) -> list[grpcclient.InferInput]:
    """ar_decoder tensors from the text_encoder, forced to exactly `length` patches."""
    client = grpcclient.InferenceServerClient(url)
    tensor = grpcclient.InferInput("TEXT", [1, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[text.encode()]], dtype=object))
    result = client.infer("text_encoder", [tensor])
    arrays = {name: result.as_numpy(name) for name in WIRE_DTYPES}
    arrays["MIN_LEN"] = np.array([[length]], np.int32)
    arrays["MAX_LEN"] = np.array([[length]], np.int32)
    inputs = []
    for name, dtype in WIRE_DTYPES.items():
        tensor = grpcclient.InferInput(name, list(arrays[name].shape), TRITON_DTYPES[dtype])
        tensor.set_data_from_numpy(arrays[name].astype(dtype))
        inputs.append(tensor)
    return inputs


def test_cancel_frees_the_decoder_slot_at_once(triton_server):
    length = 450  # far more steps than fit in the time allowed below (tiny context: 512)
    replies: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(triton_server.grpc_url)
    client.start_stream(callback=lambda result, error: replies.put((result, error)))
    client.async_stream_infer("ar_decoder", _decoder_inputs(triton_server.grpc_url, "Cancel me.", length))
    started = time.monotonic()
    for _ in range(2):
        result, error = replies.get(timeout=60)
        assert error is None, error
        assert result.as_numpy("WINDOW").ndim == 4
    assert triton_server.live_slots() == 1
    step_s = (time.monotonic() - started) / 2
    client.stop_stream(cancel_requests=True)
    cancelled = time.monotonic()
    assert triton_server.wait_idle(timeout_s=10) == 0
    freed_after = time.monotonic() - cancelled
    assert freed_after < 2.0 and freed_after < 0.5 * length * step_s, (
        f"slot freed {freed_after:.2f} s after cancel; finishing would have taken ~{length * step_s:.1f} s"
    )
    audio, _, _ = VoxCPMClient(triton_server.grpc_url).synthesize("Next one.", max_seconds=0.3, seed=2)
    assert audio.size > 0


def test_cancel_through_the_ensemble_frees_the_slot_at_once(triton_server):
    client = VoxCPMClient(triton_server.grpc_url)
    # The session's checkpoint never stops by itself: this stream would last 60 s of audio.
    stream = client.stream("A longer sentence that we stop listening to early.", max_seconds=60.0, seed=4)
    first = next(stream)
    assert first.size > 0 and triton_server.live_slots() == 1
    closed = time.monotonic()
    stream.close()  # the client library sends CANCEL_ID for this stream and waits for its end
    # Quick only because ar_decoder's back-pressure keeps few windows queued at the vocoder.
    assert time.monotonic() - closed < 2.0
    assert triton_server.wait_idle(timeout_s=2) == 0
    audio, _, _ = client.synthesize("Still here.", max_seconds=0.3, seed=5)
    assert audio.size > 0


def _cancel_error(url: str, cancel_id: bytes, beside: list[grpcclient.InferInput]) -> str:
    replies: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(url)
    client.start_stream(callback=lambda result, error: replies.put((result, error)))
    tensor = grpcclient.InferInput("CANCEL_ID", [1, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[cancel_id]], dtype=object))
    client.async_stream_infer("ar_decoder", [tensor, *beside])
    _, error = replies.get(timeout=30)
    client.stop_stream()
    return str(error)


def test_empty_cancel_id_is_an_error(triton_server):
    assert "CANCEL_ID is empty" in _cancel_error(triton_server.grpc_url, b"", [])


def test_cancel_id_with_a_stream_is_an_error(triton_server):
    stream = _decoder_inputs(triton_server.grpc_url, "Both at once.", 5)
    error = _cancel_error(triton_server.grpc_url, b"some-stream", stream)
    assert "CANCEL_ID comes alone (it ends a stream); this request also holds TOKENS" in error, error
    assert triton_server.wait_idle() == 0
