"""The `format` reward: reasoning before a single, usable final-answer line.

Following the Qwen3-0.6B-Base article: at least `min_reasoning_lines` non-empty
lines of reasoning, then exactly one answer line (the last non-empty line)
carrying one value. With `require_think` (Qwen3 thinking mode) the reasoning
sits in one well-formed `<think>…</think>` block before the answer (the
`<think>` opener may be in the prompt, as Qwen3's template puts it there).

The article's lesson is that a format bonus alone is gamed ("最终答案：不知道"
earned it), so the answer line must also carry a usable value (not a refusal,
hedge or list: `grpokit.rewards.math.classify_answer`), and the reasoning must
look like text: mostly letters/digits (`_MIN_WORD_FRACTION`, against symbol
garbage) and not degenerate repetition (zlib ratio below
`_MIN_COMPRESSION_RATIO`, against padding). Neither check judges whether the
reasoning is *right*; that is the correctness reward's job. One check reads
the prompt (TRL passes it): a completion that repeats the prompt's own worked
example earns nothing (`refuse_prompt_copies`, on by default). Measured in the
demo: without it, a policy learned to answer every question with the system
prompt's `12 + 7 = 19` / `Final answer: 19`, which the bonus paid for.

Run: `grpokit rewards score --reward format --input rows.jsonl`.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

from grpokit.rewards.math import classify_answer, extract_final_answer
from grpokit.rewards.parsing import (DECORATION, DEFAULT_MARKERS, THINK_CLOSE, THINK_OPEN, answer_markers,
                                     copies_prompt, emphasis_opened, marker_pattern, strip_emphasis)
from grpokit.rewards.registry import describe

_MIN_WORD_FRACTION = 0.5  # honest prose/maths is mostly letters and digits; "!!!\n###" garbage is not
_MIN_COMPRESSION_RATIO = 0.12  # honest text compresses to ~30-50%; a phrase repeated 1000x to <5%
_COMPRESSION_MIN_CHARS = 400  # below this zlib's header dominates the ratio


@dataclass(frozen=True)
class FormatVerdict:
    ok: bool
    reason: str  # "" when ok, else what is wrong


def check_format(
    text: str,
    markers: tuple[str, ...] = DEFAULT_MARKERS,
    min_reasoning_lines: int = 1,
    require_think: bool = False,
    prompt=None,
) -> FormatVerdict:
    """`prompt` (the completion's prompt, text or chat messages): when given, a completion that repeats the
    prompt's own worked example (`grpokit.rewards.parsing.copies_prompt`) is refused."""
    opens, closes = text.count(THINK_OPEN), text.count(THINK_CLOSE)
    if opens > 1 or closes > 1:
        return FormatVerdict(False, "several think blocks")
    if opens and not closes:
        return FormatVerdict(False, "think block never closed")
    if require_think and not closes:
        return FormatVerdict(False, "no </think> before the answer")
    think, region = "", text
    if closes:
        close = text.index(THINK_CLOSE)
        open_ = text.find(THINK_OPEN)
        if open_ > close:
            return FormatVerdict(False, "</think> before <think>")
        if open_ >= 0 and text[:open_].strip():
            return FormatVerdict(False, "text before <think>")
        think = text[open_ + len(THINK_OPEN) if open_ >= 0 else 0: close]
        region = text[close + len(THINK_CLOSE):]
        if require_think and not think.strip():
            return FormatVerdict(False, "empty think block")

    lines = [ln.strip() for ln in region.splitlines() if ln.strip()]
    pattern = marker_pattern(tuple(markers))
    # An answer line starts with its marker, after markdown decoration (parsing.answer_lines' rule): a marker in
    # the middle of a reasoning line ("Before I give the final answer: ...") is prose.
    marked = [i for i, ln in enumerate(lines) if pattern.match(ln.lstrip(DECORATION))]
    if not marked:
        if any(pattern.search(ln) for ln in lines):
            return FormatVerdict(False, "final-answer line does not start with the marker")
        return FormatVerdict(False, "no final-answer line")
    if len(marked) > 1:
        return FormatVerdict(False, f"{len(marked)} final-answer lines")
    i = marked[0]
    if i != len(lines) - 1:
        return FormatVerdict(False, "text after the final-answer line")
    line = lines[i].lstrip(DECORATION)
    decoration = lines[i][: len(lines[i]) - len(line)]
    value = strip_emphasis(line[pattern.match(line).end():], emphasis_opened(decoration))
    problem = classify_answer(value)
    if problem:
        return FormatVerdict(False, f"final answer is not a single value ({problem})")
    if extract_final_answer(text, markers) is None:  # e.g. a \boxed{} elsewhere that disagrees
        return FormatVerdict(False, "several different final answers")

    reasoning_lines = [ln for ln in think.splitlines() if ln.strip()] + lines[:i]
    if len(reasoning_lines) < min_reasoning_lines:
        return FormatVerdict(False, f"{len(reasoning_lines)} reasoning line(s), need {min_reasoning_lines}")
    reasoning = "\n".join(reasoning_lines)
    visible = [ch for ch in reasoning if not ch.isspace()]
    if visible and sum(ch.isalnum() for ch in visible) / len(visible) < _MIN_WORD_FRACTION:
        return FormatVerdict(False, "reasoning is mostly symbols")
    raw = reasoning.encode("utf-8")
    if len(raw) >= _COMPRESSION_MIN_CHARS and len(zlib.compress(raw)) / len(raw) < _MIN_COMPRESSION_RATIO:
        return FormatVerdict(False, "reasoning is repetitive padding")
    if prompt is not None and copies_prompt(lines[i], reasoning_lines, prompt):
        return FormatVerdict(False, "repeats the prompt's worked example")
    return FormatVerdict(True, "")


@describe(
    description="1.0 when the completion has reasoning (optionally in a <think> block) followed by exactly one "
    "final-answer line, the last line, carrying a single value (no refusal or hedge), else 0.0.",
    columns=(),
    params={
        "markers": "answer-line markers, case-insensitive (default: Final answer:, 最终答案：, 最终答案:)",
        "min_reasoning_lines": "non-empty reasoning lines required before the answer line (default 1)",
        "require_think": "Qwen3 thinking mode: require one well-formed <think>…</think> before the answer (default false)",
        "refuse_prompt_copies": "0.0 for a completion that repeats the prompt's worked example (its answer line and a "
        "reasoning line are lines of the prompt): the bonus must not pay for ignoring the question (default true)",
    },
)
def get_format_reward(
    markers: list[str] | tuple[str, ...] = DEFAULT_MARKERS,
    min_reasoning_lines: int = 1,
    require_think: bool = False,
    refuse_prompt_copies: bool = True,
):
    r"""The `format` scorer: 1.0 for reasoning followed by one final answer line, else 0.0.

    Example:

    >>> from grpokit.rewards.format import get_format_reward
    >>> score = get_format_reward()
    >>> score(["3 + 4 = 7\nFinal answer: 7", "Final answer: 7", "3 + 4 = 7\nFinal answer: 7\nFinal answer: 8"])
    [1.0, 0.0, 0.0]
    >>> thinking = get_format_reward(require_think=True)
    >>> thinking(["<think>\n3 + 4 = 7\n</think>\nSo:\nFinal answer: 7", "3 + 4 = 7\nFinal answer: 7"])
    [1.0, 0.0]
    """
    markers = answer_markers(markers)
    if min_reasoning_lines < 0:
        raise ValueError(f"format: min_reasoning_lines must be >= 0, got {min_reasoning_lines}")

    def score(completions: list[str], prompts: list | None = None, **_columns) -> list[float]:
        given = prompts if refuse_prompt_copies and prompts is not None else [None] * len(completions)
        return [1.0 if check_format(c, markers, min_reasoning_lines, require_think, p).ok else 0.0
                for c, p in zip(completions, given)]

    def explain(completion: str, prompt=None, **_row) -> dict:  # a row's `prompt` column, as in TRL datasets
        v = check_format(completion, markers, min_reasoning_lines, require_think,
                         prompt if refuse_prompt_copies else None)
        return {"reward": 1.0 if v.ok else 0.0, "reason": v.reason or "ok"}

    score.explain = explain
    return score
