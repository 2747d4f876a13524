"""A small Llama-style tokenizer built offline (no download) for generated checkpoints.

Same shape as the released tokenizers: SentencePiece-style BPE with "▁" word markers and byte
fallback, special tokens <unk>/<s>/</s> at 0-2 and audio markers at the ids the model hard-codes
(101-104). The merges spell a short list of English and Chinese words, including multi-character
Chinese tokens, so the reference's split of those tokens into characters is exercised.
"""

from __future__ import annotations

import json
import string
from typing import Any

from tokenizers import AddedToken, Tokenizer, decoders, normalizers
from tokenizers.models import BPE

WORD_MARKER = "\u2581"
SPECIAL_TOKENS = {0: "<unk>", 1: "<s>", 2: "</s>", 101: "<|audio_start|>", 102: "<|audio_end|>",
                  103: "<|ref_audio_start|>", 104: "<|ref_audio_end|>"}
_FIRST_BYTE_ID = 105

_CHINESE_CHARS = "你好世界中国语音合成我们的是在有不这人了大天"
_WORDS = (
    "the", "hello", "world", "this", "is", "a", "test", "voice", "speech", "of", "and", "to", "in",
    "sentence", "first", "model", "audio", "streaming", "server",
    "你好", "世界", "中国", "语音", "合成", "我们", "语音合成",
)


def _word_merges(word: str) -> list[tuple[str, str]]:
    """Left-to-right merges that assemble `word` from its characters."""
    merges = []
    built = word[0]
    for char in word[1:]:
        merges.append((built, char))
        built += char
    return merges


def build_tiny_tokenizer() -> Tokenizer:
    vocab: dict[str, int] = {}
    for token_id in range(_FIRST_BYTE_ID):
        vocab[SPECIAL_TOKENS.get(token_id, f"<reserved_{token_id}>")] = token_id
    for byte in range(256):
        vocab[f"<0x{byte:02X}>"] = _FIRST_BYTE_ID + byte

    def add(token: str) -> None:
        if token not in vocab:
            vocab[token] = len(vocab)

    add(WORD_MARKER)
    for char in string.ascii_letters + string.digits + string.punctuation + _CHINESE_CHARS + "，。！？":
        add(char)
    merges: list[tuple[str, str]] = []
    for word in _WORDS:
        # Both the word-initial form ("▁hello", "▁你好") and the bare form ("你好" after
        # Chinese punctuation with no space) exist, as in real vocabularies.
        for form in (WORD_MARKER + word, word):
            for left, right in _word_merges(form):
                if (left, right) not in merges:
                    merges.append((left, right))
                add(left + right)

    tokenizer = Tokenizer(BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend(WORD_MARKER), normalizers.Replace(" ", WORD_MARKER)])
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace(WORD_MARKER, " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS.values()])
    return tokenizer


def tokenizer_config() -> dict[str, Any]:
    """tokenizer_config.json contents that make transformers load it as LlamaTokenizerFast."""
    return {
        "tokenizer_class": "LlamaTokenizerFast",
        "bos_token": SPECIAL_TOKENS[1],
        "eos_token": SPECIAL_TOKENS[2],
        "unk_token": SPECIAL_TOKENS[0],
        "add_bos_token": True,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "legacy": True,
        "model_max_length": 1000000,
        "added_tokens_decoder": {
            str(token_id): {"content": content, "lstrip": False, "rstrip": False, "normalized": False,
                            "single_word": False, "special": True}
            for token_id, content in SPECIAL_TOKENS.items()
        },
    }


def tokenizer_files() -> dict[str, str]:
    """File name -> text for the tokenizer part of a checkpoint folder."""
    return {
        "tokenizer.json": build_tiny_tokenizer().to_str(pretty=True),
        "tokenizer_config.json": json.dumps(tokenizer_config(), indent=2, ensure_ascii=False),
        "special_tokens_map.json": json.dumps(
            {"bos_token": SPECIAL_TOKENS[1], "eos_token": SPECIAL_TOKENS[2], "unk_token": SPECIAL_TOKENS[0]}, indent=2
        ),
    }


def tiny_vocab_size() -> int:
    return build_tiny_tokenizer().get_vocab_size(with_added_tokens=True)
