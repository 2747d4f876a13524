"""The fixed text set every system is given, so prompts (and prefill cost) match across systems."""

from __future__ import annotations

TEXTS = (
    "The quick brown fox jumps over the lazy dog while the morning sun rises above the quiet hills.",
    "Streaming speech synthesis lets a listener hear the first words before the sentence is finished.",
    "Please remember to bring your umbrella tomorrow, because the forecast promises rain all afternoon.",
    "Our train leaves the central station at half past seven, so we should meet at the platform early.",
    "A good benchmark fixes the workload first and only then compares the systems that serve it.",
    "She opened the old wooden box and found a letter that her grandfather had written long ago.",
    "The library will stay open late on Thursday evenings for students preparing their final exams.",
    "Every morning the baker lights the oven before dawn, and the whole street smells of fresh bread.",
)


def text_for(request_index: int) -> str:
    if request_index < 0:
        raise ValueError(f"request_index must be >= 0, got {request_index}")
    return TEXTS[request_index % len(TEXTS)]
