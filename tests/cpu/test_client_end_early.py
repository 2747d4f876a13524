"""VoxCPMClient._end_early: after a CANCEL_ID it waits for the stream's final response, but not
past an error that says none is coming."""

import queue
import sys
import time
from pathlib import Path

import pytest
from tritonclient.utils import InferenceServerException

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from client.streaming import VoxCPMClient  # noqa: E402


class _Sent:
    """Stands in for the gRPC client: records the CANCEL_ID request instead of sending it."""

    def __init__(self) -> None:
        self.request_ids: list[str] = []

    def async_stream_infer(self, model_name, inputs, request_id, enable_empty_final_response) -> None:
        self.request_ids.append(request_id)


@pytest.mark.parametrize("error, ended", [
    # the decoder's process died: the cancel fails, and the stream will send nothing more
    ("in ensemble 'voxcpm', Stub process 'ar_decoder_0_0' is not healthy. [request id: s1-cancel]", False),
    ("failed to connect to all addresses", False),
    ("Stream s1 failed: prompt too long [request id: s1]", True),  # the stream's own error ends it
])
def test_an_error_ends_the_wait_at_once(error, ended):
    replies = queue.Queue()
    replies.put((None, InferenceServerException(error)))
    sent = _Sent()
    started = time.monotonic()
    assert VoxCPMClient("localhost:1")._end_early(sent, replies, "s1") is ended
    assert time.monotonic() - started < 1.0 and sent.request_ids == ["s1-cancel"]
