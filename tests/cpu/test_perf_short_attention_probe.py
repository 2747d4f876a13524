"""perf/short_attention_probe.py's --fastest: which library a device call's probe output favours."""

from __future__ import annotations

import pytest

from perf.short_attention_probe import fastest

PROBE = """\
main short_attention sequences=128 seq_len=11 scales=input: 7.80 us
main short_attention sequences=2 seq_len=11 scales=input: 2.65 us
tok short_attention sequences=128 seq_len=11 scales=input: 7.10 us
tok short_attention sequences=128 seq_len=11 scales=given: 6.00 us
tok2 short_attention sequences=128 seq_len=11 scales=input: 7.30 us
tok2 short_attention sequences=2 seq_len=11 scales=input: 2.40 us
main short_attention sequences=128 seq_len=11 scales=input: 7.75 us
tok short_attention sequences=128 seq_len=11 scales=input: 7.20 us
tok2 short_attention sequences=128 seq_len=11 scales=input: 6.90 us
""".splitlines()


def test_the_best_repeat_of_each_variant_decides():
    assert fastest(PROBE, ["tok", "tok2"]) == "tok2"  # 6.90 beats tok's best, 7.10
    assert fastest(PROBE, ["main", "tok"]) == "tok"


def test_only_the_named_case_counts():
    assert fastest(PROBE, ["tok", "tok2"], "2:input") == "tok2"  # tok has no 2:input line
    assert fastest(PROBE, ["main", "tok", "tok2"], "128:given") == "tok"


def test_no_time_for_the_case_is_an_error():
    with pytest.raises(SystemExit, match="512:given"):
        fastest(PROBE, ["tok", "tok2"], "512:given")
