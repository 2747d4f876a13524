"""Settings that two committed model configs must agree on."""

import re
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[2] / "model_repository"


def _parameter(config: Path, key: str) -> str:
    match = re.search(r'key: "%s" value: \{ string_value: "([^"]*)" \}' % re.escape(key), config.read_text())
    assert match, f"{config} has no parameter {key}"
    return match.group(1)


def test_vocoder_graphs_cover_the_decoders_chunks():
    # Windows with more new patches than the vocoder captured graphs for decode eagerly (slowly).
    decoder = _parameter(REPOSITORY / "ar_decoder" / "config.pbtxt", "chunk_patches")
    vocoder = _parameter(REPOSITORY / "vocoder" / "config.pbtxt", "chunk_patches")
    assert int(vocoder) == int(decoder)
