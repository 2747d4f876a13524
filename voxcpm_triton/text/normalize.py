"""Text clean-up the reference applies to the target text by default (VoxCPM.generate with
normalize=False): newlines become spaces and every whitespace run collapses to one space.

The reference's optional normalize=True path (number/date spelling via wetext and inflect) is not
reproduced: it is off by default and pulls heavy dependencies.
"""

from __future__ import annotations

import re

_WHITESPACE_RUN = re.compile(r"\s+")


def clean_text(text: str) -> str:
    # Leading/trailing single spaces are kept on purpose: the reference keeps them and the
    # tokenizer's ids depend on them.
    return _WHITESPACE_RUN.sub(" ", text.replace("\n", " "))
