"""Math answers: extract the final answer from a completion and compare it with the gold one.

This module is the single verifier used by the `math_correctness` reward and by
evaluation (`grpokit.evaluate`), so training and evaluation cannot drift apart.

What is covered: the answer line (`Final answer:`, `最终答案：`/`最终答案:`,
case-insensitive), the LAST such line wins; numbers with thousands separators,
`$`, trailing units; integer/decimal/fraction equivalence (2.50 = 2.5,
1/2 = 0.5). What is not (yet): LaTeX, refusals and hedges, units in the
middle of text — see the reward library issue.
"""
from __future__ import annotations

import re
from fractions import Fraction

from grpokit.rewards.registry import register

DEFAULT_MARKERS = ("Final answer:", "最终答案：", "最终答案:")
_ANSWER_TAIL_CHARS = 2000  # regexes on 100k-char completions are slow; the answer line sits at the end
_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)(/\d+)?$")
_GSM8K_GOLD = re.compile(r"####\s*(.+?)\s*$", re.S)


def extract_final_answer(text: str, markers: tuple[str, ...] = DEFAULT_MARKERS) -> str | None:
    """The text after the last answer marker, up to the end of that line; None if there is none."""
    tail = text[-_ANSWER_TAIL_CHARS:]
    best: tuple[int, str] | None = None
    low = tail.lower()
    for marker in markers:
        pos = low.rfind(marker.lower())
        if pos >= 0 and (best is None or pos > best[0]):
            rest = tail[pos + len(marker):].split("\n", 1)[0]
            best = (pos, rest.strip())
    return None if best is None else best[1]


def parse_gold(answer: object) -> str | None:
    """Gold answers may be GSM8K-style ('... #### 72'), numbers, or strings."""
    if answer is None:
        return None
    text = str(answer)
    m = _GSM8K_GOLD.search(text)
    if m:
        text = m.group(1)
    text = text.strip()
    return text or None


def normalize_number(text: str) -> Fraction | None:
    """'1,234.50 dollars' -> Fraction(2469, 2); None if the text is not a single number."""
    t = text.strip().rstrip(".。").replace(",", "").replace("$", "").strip()
    t = re.sub(r"\s*[A-Za-z\u4e00-\u9fff%]+$", "", t)  # trailing unit / measure word
    if not _NUMBER.match(t):
        return None
    try:
        return Fraction(t)
    except (ValueError, ZeroDivisionError):
        return None


def answers_match(predicted: str | None, gold: str) -> bool:
    if predicted is None:
        return False
    p, g = normalize_number(predicted), normalize_number(gold)
    if p is not None and g is not None:
        return p == g
    return predicted.strip().lower() == gold.strip().lower()


def score_math(completion: str, answer: object, markers: tuple[str, ...] = DEFAULT_MARKERS) -> float | None:
    gold = parse_gold(answer)
    if gold is None:
        return None
    return 1.0 if answers_match(extract_final_answer(completion, markers), gold) else 0.0


@register(
    "math_correctness",
    description="1.0 when the completion's final answer line equals the gold answer (numeric equivalence), else 0.0; "
    "null when the gold answer cannot be parsed.",
    columns=("answer",),
    params={"markers": "answer-line markers to look for (default: Final answer:, 最终答案：, 最终答案:)"},
)
def get_math_correctness_reward(markers: list[str] | tuple[str, ...] = DEFAULT_MARKERS):
    markers = tuple(markers)

    def score(completions: list[str], answer: list, **_columns) -> list[float | None]:
        return [score_math(c, a, markers) for c, a in zip(completions, answer)]

    return score
