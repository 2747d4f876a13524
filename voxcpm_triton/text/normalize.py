"""Text clean-up the reference applies to the target text by default (VoxCPM.generate with
normalize=False): newlines become spaces and every whitespace run collapses to one space.

The reference's optional normalize=True path (numbers, dates and symbols as words) is
text.spoken_form, applied after this clean-up as the reference does.
"""

from __future__ import annotations

import re

_WHITESPACE_RUN = re.compile(r"\s+")


def clean_text(text: str) -> str:
    # Leading/trailing single spaces are kept on purpose: the reference keeps them and the
    # tokenizer's ids depend on them.
    return _WHITESPACE_RUN.sub(" ", text.replace("\n", " "))
