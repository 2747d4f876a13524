"""The checkpoint's text tokenizer, loaded from tokenizer.json with the `tokenizers` library.

Ids equal the reference's: LlamaTokenizerFast.tokenize (no special tokens added), then every token
that is a multi-character run of CJK ideographs in the vocabulary (after dropping the "▁" word
marker) is split into its single characters, and tokens map to ids with unknown ones -> unk id.
The reference does this so that Chinese is read one character per token.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import AddedToken, Tokenizer

_WORD_MARKER = "\u2581"


def _is_cjk_run(token: str) -> bool:
    return len(token) >= 2 and all("\u4e00" <= ch <= "\u9fff" for ch in token)


def _token_content(value: object) -> str | None:
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


def _read_json(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object, got a {type(value).__name__}")
    return value


def _added_token(content: str, entry: dict, special: bool) -> AddedToken:
    """An AddedToken with the flags a tokenizer file's entry gives it (absent ones false)."""
    return AddedToken(content, single_word=entry.get("single_word", False), lstrip=entry.get("lstrip", False),
                      rstrip=entry.get("rstrip", False), normalized=entry.get("normalized", False), special=special)


def _add_configured_tokens(tokenizer: Tokenizer, added: dict[str, dict]) -> None:
    """Tokens listed in tokenizer_config.json but absent from tokenizer.json: transformers appends
    them at load time, so do the same (ids in the order of their configured ids)."""
    if not all(isinstance(key, str) and key.isdigit() for key in added):
        raise ValueError(f"tokenizer_config.json: the keys of added_tokens_decoder are token ids; got {sorted(added)}")
    for token_id, entry in sorted(added.items(), key=lambda item: int(item[0])):
        content = entry["content"]
        if tokenizer.token_to_id(content) is not None:
            continue
        token = _added_token(content, entry, special=entry.get("special", False))
        if token.special:
            tokenizer.add_special_tokens([token])
        else:
            tokenizer.add_tokens([token])
        if tokenizer.token_to_id(content) != int(token_id):
            raise ValueError(f"tokenizer_config.json puts {content!r} at id {token_id}, "
                             f"but tokenizer.json places it at {tokenizer.token_to_id(content)}")


# transformers' special-token attributes in its order, and LlamaTokenizerFast's defaults for them.
_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_LLAMA_DEFAULTS = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}


def _configured_specials(config: dict, special_map: dict) -> dict[str, object]:
    """The special tokens LlamaTokenizerFast ends up with: its defaults, then tokenizer_config.json;
    special_tokens_map.json only counts for a config without `added_tokens_decoder` (transformers
    reads it on that legacy path alone, merging the additional tokens of both)."""
    values: dict[str, object] = dict(_LLAMA_DEFAULTS)
    values.update({key: config[key] for key in _SPECIAL_KEYS + ("additional_special_tokens",) if key in config})
    if "added_tokens_decoder" not in config:
        for key, value in special_map.items():
            if key == "additional_special_tokens":
                merged = list(values.get("additional_special_tokens") or [])
                values[key] = merged + [token for token in value or [] if token not in merged]
            elif key in _SPECIAL_KEYS:
                values[key] = value
    return values


def _add_special_tokens(tokenizer: Tokenizer, specials: dict[str, object]) -> None:
    """Special tokens that are not added tokens of tokenizer.json yet: transformers adds them at load
    time (one already in the vocabulary keeps its id and becomes unsplittable in text)."""
    added = {token.content for token in tokenizer.get_added_tokens_decoder().values()}
    listed: list[object] = [specials.get(key) for key in _SPECIAL_KEYS]
    listed += list(specials.get("additional_special_tokens") or [])
    for value in listed:
        content = _token_content(value)
        if content is None or content in added:
            continue
        tokenizer.add_special_tokens([_added_token(content, value if isinstance(value, dict) else {}, special=True)])
        added.add(content)


class TextTokenizer:
    def __init__(self, tokenizer: Tokenizer, unk_token: str | None) -> None:
        self._tokenizer = tokenizer
        vocab = tokenizer.get_vocab(with_added_tokens=True)
        self._multichar = frozenset(token for token in vocab if _is_cjk_run(token))
        self.unk_id = tokenizer.token_to_id(unk_token) if unk_token is not None else None
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)

    @classmethod
    def from_folder(cls, folder: str | Path) -> "TextTokenizer":
        folder = Path(folder)
        path = folder / "tokenizer.json"
        if not path.is_file():
            raise FileNotFoundError(f"no tokenizer.json in checkpoint folder {str(folder)!r}")
        try:
            tokenizer = Tokenizer.from_file(str(path))
        except Exception as exc:  # the tokenizers library's errors name no file
            raise ValueError(f"{path}: not a tokenizer file the tokenizers library reads ({exc})") from exc
        config = _read_json(folder / "tokenizer_config.json")
        _add_configured_tokens(tokenizer, config.get("added_tokens_decoder") or {})
        specials = _configured_specials(config, _read_json(folder / "special_tokens_map.json"))
        _add_special_tokens(tokenizer, specials)
        return cls(tokenizer, _token_content(specials["unk_token"]))

    def tokenize(self, text: str) -> list[str]:
        tokens = self._tokenizer.encode(text, add_special_tokens=False).tokens
        pieces: list[str] = []
        for token in tokens:
            bare = token.replace(_WORD_MARKER, "")
            if bare in self._multichar:
                pieces.extend(bare)
            else:
                pieces.append(token)
        return pieces

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        ids: list[int] = []
        for token in self.tokenize(text):
            token_id = self._tokenizer.token_to_id(token)
            if token_id is None:
                if self.unk_id is None:
                    raise ValueError(f"token {token!r} is not in the vocabulary and the tokenizer has no unk token")
                token_id = self.unk_id
            ids.append(token_id)
        return ids
