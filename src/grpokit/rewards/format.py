"""The `format` reward: reasoning lines before a single final-answer line.

Following the 0.6B-Base article: at least `min_reasoning_lines` non-empty
lines before the answer line, and exactly one answer line carrying a value.
"""
from __future__ import annotations

from grpokit.rewards.math import DEFAULT_MARKERS
from grpokit.rewards.registry import register


def format_ok(text: str, markers: tuple[str, ...], min_reasoning_lines: int) -> bool:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    answer_idx = [i for i, ln in enumerate(lines) if any(ln.lower().startswith(m.lower()) for m in markers)]
    if len(answer_idx) != 1:
        return False
    i = answer_idx[0]
    line = lines[i]
    marker = next(m for m in markers if line.lower().startswith(m.lower()))
    value = line[len(marker):].strip()
    return bool(value) and i >= min_reasoning_lines and i == len(lines) - 1


@register(
    "format",
    description="1.0 when the completion has reasoning lines followed by exactly one final-answer line "
    "(the last line) with a value after the marker, else 0.0.",
    columns=(),
    params={
        "markers": "answer-line markers (default: Final answer:, 最终答案：, 最终答案:)",
        "min_reasoning_lines": "non-empty lines required before the answer line (default 1)",
    },
)
def get_format_reward(markers: list[str] | tuple[str, ...] = DEFAULT_MARKERS, min_reasoning_lines: int = 1):
    markers = tuple(markers)

    def score(completions: list[str], **_columns) -> list[float]:
        return [1.0 if format_ok(c, markers, min_reasoning_lines) else 0.0 for c in completions]

    return score
