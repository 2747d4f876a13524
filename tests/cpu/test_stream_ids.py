"""The ar_decoder's stream ids give back the Triton request id they were made from."""

from voxcpm_triton.serving.stream_ids import new_stream_id, request_id_of


def test_the_request_id_comes_back_whatever_it_holds():
    for request_id in ("abc", "a#b", "7", ""):
        assert request_id_of(new_stream_id(request_id, 12)) == request_id


def test_streams_of_one_request_id_differ_by_their_number():
    assert new_stream_id("abc", 1) != new_stream_id("abc", 2)


def test_an_id_not_made_here_has_no_request_id():
    assert request_id_of("no-separator") == ""
