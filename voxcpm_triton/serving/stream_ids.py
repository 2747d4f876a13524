"""The ar_decoder's stream ids, `<Triton request id>#<n>`: the request id keeps a stream findable by
the id its client and the other models know (CANCEL_ID, the vocoder's acknowledgement board), and
the instance's counter n makes it unique where a client reuses an id or sends none."""

from __future__ import annotations


def new_stream_id(request_id: str, number: int) -> str:
    return f"{request_id}#{number}"


def request_id_of(stream_id: str) -> str:
    """The Triton request id `stream_id` was made from ("" for a request that had none)."""
    return stream_id.rpartition("#")[0]
