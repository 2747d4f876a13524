"""voxcpm_triton.text.spoken_form equals the reference's TextNormalizer (generate(normalize=True)) on
English and Chinese text that exercises each of its rules, and says what is missing without wetext."""

import builtins

import pytest

from tests.reference_shim import import_reference
from voxcpm_triton.text.spoken_form import NormalizationFailed, NormalizerUnavailable, SpokenForm

pytest.importorskip("wetext")
pytest.importorskip("inflect")

TEXTS = [
    "It costs $3.50 on 12/05/2026 at 3:30pm, about 25% more.",
    "Call 555-1234 now! Flight BA2490 leaves at 07:45.",
    "x-2 = 5, and the room is 10 km away",
    "The 3rd of 4 runs took 1,234.5 ms and 2nd place.",
    "# Title\n- item one\n- item **two** with [a link](http://a.b)<b>bold</b>\n\nend",
    "Emoji😀, a keycap 1\ufe0f\u20e3 and “curly quotes”\tand a tab",
    "我有3个苹果，价格是¥12.5元，2026年12月5日。",
    "第1章 共100页 温度-5℃，x-2 = 3，约≈4，面积5m²，√9，a<b",
    "（括号）【方括号】——破折号 and `反引号`",
    "Hello 世界 123 and more 英文 words",
    "电话是 010-12345678，比分是 3:2。",
    "550 + 320 = 870 千卡。",
]


@pytest.fixture(scope="module")
def reference_normalizer():
    if import_reference() is None:
        pytest.skip("reference voxcpm package not installed")
    from voxcpm.utils.text_normalize import TextNormalizer

    return TextNormalizer()


@pytest.fixture(scope="module")
def spoken():
    return SpokenForm()


@pytest.mark.reference
@pytest.mark.parametrize("text", TEXTS)
def test_equals_the_reference(reference_normalizer, spoken, text):
    assert spoken(text) == reference_normalizer.normalize(text)


@pytest.mark.reference
@pytest.mark.parametrize("text", ["An emoji 😀 here.", "Some `code` here and ![img](i.png) there."])
def test_reads_what_the_reference_fails_on_as_it_reads_the_squeezed_text(reference_normalizer, spoken, text):
    # Dropping the emoji or markup leaves two spaces, on which wetext's English grammar fails.
    with pytest.raises(AssertionError):
        reference_normalizer.normalize(text)
    squeezed = text.replace(" 😀 ", " ").replace(" `code` ", " ").replace(" ![img](i.png) ", " ")
    assert spoken(text) == reference_normalizer.normalize(squeezed)


def test_text_the_grammar_cannot_read_is_a_clear_error(spoken):
    with pytest.raises(NormalizationFailed, match="cannot read 'place 7²'; send the text without normalisation"):
        spoken("place 7²")


def test_numbers_become_words(spoken):
    assert spoken("I have 3 apples.") == "I have three apples."
    assert spoken("我有3个苹果") == "我有三个苹果"


def test_missing_packages_are_named(monkeypatch):
    real_import = builtins.__import__

    def without_wetext(name, *args, **kwargs):
        if name == "wetext":
            raise ImportError("No module named 'wetext'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_wetext)
    with pytest.raises(NormalizerUnavailable, match="needs the packages wetext and inflect"):
        SpokenForm()("3 apples")
