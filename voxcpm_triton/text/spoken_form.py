"""Text in spoken form: what the reference's generate(normalize=True) does to the target text.

Numbers, dates, money, units and symbols become words through the same weighted finite-state
grammars the reference uses (the `wetext` package: its Chinese grammar when the text holds a CJK
ideograph, else its English one), with the same fix-ups before and after them, so that a request
asking for it is tokenised exactly as the reference would tokenise it. Markdown markup, HTML tags and
emoji are dropped first.

`wetext` and `inflect` are optional dependencies (build/setup.sh installs them): without them the
rest of the server works, and only a request asking for normalisation gets an error naming them.
Loading the grammars takes ~2.5 s, so it happens on the first such request of a process; after that
a sentence costs ~3-6 ms (perf/RESULTS.md run 66).
"""

from __future__ import annotations

import re
import threading
from itertools import groupby

_CJK = re.compile(r"[\u4e00-\u9fff]")

# Markdown and HTML, in the order the reference strips them (code before links, links before tags).
_MARKUP = [
    (re.compile(r"```.*?```", re.DOTALL), ""),  # fenced code blocks
    (re.compile(r"`[^`]*`"), ""),  # inline code
    (re.compile(r"!\[[^\]]*\]\([^\)]+\)"), ""),  # images
    (re.compile(r"\[([^\]]+)\]\([^)]+\)"), r"\1"),  # links keep their text
    (re.compile(r"^(\s*)-\s+", re.MULTILINE), r"\1"),  # list bullets
    (re.compile(r"<[^>]+>"), ""),  # HTML tags
    (re.compile(r"^#{1,6}\s*", re.MULTILINE), ""),  # heading marks
    (re.compile(r"\n\s*\n"), "\n"),  # blank lines
]

# Chinese only: symbols wetext's grammar leaves alone, spoken as the reference speaks them.
_ZH_SYMBOLS = {"²": "平方", "³": "立方", "√": "根号", "≈": "约等于", "<": "小于"}
_ZH_SPACED = {"（": " ", "）": " ", "【": " ", "】": " ", "——": " ", "`": ""}
# With any of these in the text, a hyphen between a letter or digit and a digit is an operator: the
# grammar would otherwise read "x-2" as "x negative 2".
_ZH_ARITHMETIC = re.compile(r"[\d$%^*_+≥≤≠×÷?=]")
_ZH_MINUS = re.compile(r"(?<=[a-zA-Z0-9])-(?=\d)")


class NormalizerUnavailable(ValueError):
    """wetext or inflect is not installed."""


class NormalizationFailed(ValueError):
    """The grammar could not read the text."""


def _english(grammar, text: str) -> str:
    """wetext's English grammar fails on a run of spaces (which dropped markup or emoji leave behind)
    and the reference fails with it. Where it does, the run is squeezed to one space and the text read
    again, so every text the reference reads is read as it reads it, and others are read too."""
    try:
        return grammar.normalize(text)
    except AssertionError:
        pass
    try:
        return grammar.normalize(re.sub(r" {2,}", " ", text))
    except AssertionError:
        raise NormalizationFailed(
            f"the English text-normalisation grammar cannot read {text!r}; send the text without normalisation"
        ) from None


def _strip_markup(text: str) -> str:
    import regex  # the emoji property classes; `re` has none

    for pattern, replacement in _MARKUP:
        text = pattern.sub(replacement, text)
    text = regex.sub(r"\p{Emoji_Presentation}|\p{Emoji}\uFE0F", "", text.strip())
    return text.replace("\n", " ").replace("\t", " ").replace("“", '"').replace("”", '"')


def _keep_ascii_spaces(text: str) -> str:
    """Drop every space that does not stand between two non-space ASCII characters (spaces between
    Chinese characters are not read; those inside an English phrase are)."""
    def keeps(i: int) -> bool:
        if i == 0 or i == len(text) - 1:
            return False
        before, after = text[i - 1], text[i + 1]
        return before.isascii() and before != " " and after.isascii() and after != " "

    return "".join(c for i, c in enumerate(text) if c != " " or keeps(i))


class SpokenForm:
    """Callable: text -> text in spoken form. Builds its grammars on first use (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._grammars = None

    def _load(self):
        with self._lock:
            if self._grammars is None:
                try:
                    import inflect
                    from wetext import Normalizer
                except (ImportError, OSError) as exc:  # OSError: a native library that does not load
                    raise NormalizerUnavailable(
                        f"text normalisation needs the packages wetext and inflect ({exc}); "
                        "install them with pip install wetext inflect"
                    ) from None
                self._grammars = (Normalizer(lang="zh", operator="tn", remove_erhua=True),
                                  Normalizer(lang="en", operator="tn"), inflect.engine())
        return self._grammars

    def __call__(self, text: str) -> str:
        chinese, english, numbers = self._load()
        is_chinese = _CJK.search(text) is not None
        text = _strip_markup(text)
        if is_chinese:
            text = text.replace("=", "等于")
            if _ZH_ARITHMETIC.search(text):
                text = _ZH_MINUS.sub(" - ", text)
            text = _keep_ascii_spaces(chinese.normalize(text))
            for table in (_ZH_SYMBOLS, _ZH_SPACED):
                for symbol, spoken in table.items():
                    text = text.replace(symbol, spoken)
            return text
        # The English grammar leaves some digit runs alone (in codes, after letters): spell those out.
        # A run is what str.isdigit accepts, superscripts included, as in the reference.
        runs = groupby(_english(english, text), str.isdigit)
        return "".join(numbers.number_to_words("".join(run)) if digits else "".join(run) for digits, run in runs)
