"""TextTokenizer (tokenizers library only) gives the reference's ids: LlamaTokenizerFast plus the
reference's split of multi-character Chinese tokens, on the generated tiny tokenizer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reference_shim import import_reference
from voxcpm_triton.checkpoint.tiny_tokenizer import SPECIAL_TOKENS, tokenizer_files
from voxcpm_triton.text.normalize import clean_text
from voxcpm_triton.text.tokenizer import TextTokenizer

TEXTS = [
    "Hello, this is the first test sentence.",
    "你好世界！我们的语音合成",
    "hello 你好 world 中国人 ",
    "  double  spaces, accents é and emoji 😀",
    "语音合成。谢谢",
    "<|audio_start|> special tokens <s> stay whole",
    "mixed English和中文 text 123",
    "",
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tokenizer")
    for name, text in tokenizer_files().items():
        (path / name).write_text(text, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def hf_tokenizer(folder: Path):
    transformers = pytest.importorskip("transformers")
    return transformers.LlamaTokenizerFast.from_pretrained(str(folder))


def test_special_token_ids(folder: Path) -> None:
    tokenizer = TextTokenizer.from_folder(folder)
    for token_id, content in SPECIAL_TOKENS.items():
        assert tokenizer.encode(content) == [token_id]
    assert tokenizer.unk_id == 0


@pytest.mark.parametrize("text", [t for t in TEXTS if not any("\u4e00" <= c <= "\u9fff" for c in t)])
def test_non_chinese_text_matches_llama_tokenizer_fast(folder: Path, hf_tokenizer, text: str) -> None:
    expected = hf_tokenizer.convert_tokens_to_ids(hf_tokenizer.tokenize(text))
    assert TextTokenizer.from_folder(folder).encode(text) == expected


def test_multichar_chinese_tokens_are_split(folder: Path, hf_tokenizer) -> None:
    tokenizer = TextTokenizer.from_folder(folder)
    assert "▁你好" in hf_tokenizer.tokenize("hi 你好")  # the vocabulary really has the merged token
    assert tokenizer.tokenize("hi 你好")[-2:] == ["你", "好"]
    assert tokenizer.encode("语音合成") == hf_tokenizer.convert_tokens_to_ids(list("语音合成"))


@pytest.mark.reference
@pytest.mark.parametrize("text", TEXTS)
def test_matches_reference_wrapper(folder: Path, hf_tokenizer, text: str) -> None:
    if import_reference() is None:
        pytest.skip("reference voxcpm package not installed")
    from voxcpm.model.utils import mask_multichar_chinese_tokens

    reference = mask_multichar_chinese_tokens(hf_tokenizer)
    assert TextTokenizer.from_folder(folder).encode(text) == reference(text)


def test_tokens_only_in_tokenizer_config_are_added_like_transformers(folder: Path, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    import json
    import shutil

    extended = tmp_path / "extended"
    shutil.copytree(folder, extended)
    config = json.loads((extended / "tokenizer_config.json").read_text())
    next_id = TextTokenizer.from_folder(folder).vocab_size
    for offset, content in enumerate(["<|extra_special|>", "<|extra_plain|>"]):
        config["added_tokens_decoder"][str(next_id + offset)] = {
            "content": content, "lstrip": False, "rstrip": False, "normalized": False, "single_word": False,
            "special": offset == 0}
    (extended / "tokenizer_config.json").write_text(json.dumps(config))
    hf = transformers.LlamaTokenizerFast.from_pretrained(str(extended))
    ours = TextTokenizer.from_folder(extended)
    text = "say <|extra_special|> and <|extra_plain|> now"
    assert ours.encode(text) == hf.convert_tokens_to_ids(hf.tokenize(text))
    assert next_id in ours.encode(text) and next_id + 1 in ours.encode(text)


def _variant(folder: Path, tmp_path: Path, config_edit, special_map: dict | None = None,
             drop_added: bool = False) -> Path:
    """A copy of the tiny tokenizer with its tokenizer_config.json edited, special_tokens_map.json
    replaced, or tokenizer.json's added tokens left out (the vocabulary keeps <unk>, <s>, </s>)."""
    import json
    import shutil

    variant = tmp_path / "variant"
    shutil.copytree(folder, variant)
    config = json.loads((variant / "tokenizer_config.json").read_text())
    config_edit(config)
    (variant / "tokenizer_config.json").write_text(json.dumps(config))
    if special_map is not None:
        (variant / "special_tokens_map.json").write_text(json.dumps(special_map))
    if drop_added:
        data = json.loads((variant / "tokenizer.json").read_text())
        data["added_tokens"] = []
        data["model"]["vocab"].update({SPECIAL_TOKENS[i]: i for i in (0, 1, 2)})
        (variant / "tokenizer.json").write_text(json.dumps(data))
    return variant


SPECIAL_TEXT = "say <|extra|> then <s> and </s> or <|audio_start|> and <unk> here"


def _drop_added_decoder(config: dict) -> None:
    config.pop("added_tokens_decoder")


@pytest.mark.parametrize("case", ["config_additional", "legacy_map_additional", "no_added_tokens"])
def test_special_tokens_the_files_name_are_added_like_transformers(folder: Path, tmp_path: Path, case: str) -> None:
    transformers = pytest.importorskip("transformers")
    if case == "config_additional":
        variant = _variant(folder, tmp_path, lambda c: c.update(additional_special_tokens=["<|extra|>"]))
    elif case == "legacy_map_additional":
        variant = _variant(folder, tmp_path, _drop_added_decoder, special_map={
            "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "additional_special_tokens": ["<|extra|>"]})
    else:
        variant = _variant(folder, tmp_path, _drop_added_decoder, drop_added=True)
    hf = transformers.LlamaTokenizerFast.from_pretrained(str(variant))
    ours = TextTokenizer.from_folder(variant)
    expected = hf.convert_tokens_to_ids(hf.tokenize(SPECIAL_TEXT))
    assert ours.encode(SPECIAL_TEXT) == expected
    assert ours.vocab_size == len(hf)
    if case != "no_added_tokens":
        assert len(hf) - 1 in expected  # <|extra|>: one new token, not split into pieces


def test_missing_tokenizer_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        TextTokenizer.from_folder(tmp_path)


@pytest.mark.parametrize(
    "raw, cleaned",
    [
        ("line one\nline two", "line one line two"),
        ("tabs\tand\r\n  runs   of space", "tabs and runs of space"),
        (" keeps single edges ", " keeps single edges "),
        ("\n\nhello\n", " hello "),
        ("你好，\n世界", "你好， 世界"),
    ],
)
def test_clean_text_matches_reference_default(raw: str, cleaned: str) -> None:
    assert clean_text(raw) == cleaned
