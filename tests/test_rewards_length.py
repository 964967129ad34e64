"""length: short/empty, soft over-long ramp, think budget; and the token estimate."""
from __future__ import annotations

import pytest

from grpokit.rewards.length import estimate_tokens, length_penalty
from grpokit.rewards.parsing import think_text
from grpokit.rewards.registry import build_reward

OK = "a" * 60  # comfortably above the 50-character floor
WORDS = "word " * 400  # 2000 chars, ~500 estimated tokens

# (completion, params, expected penalty)
CASES = [
    ("", {}, -1.0),  # empty
    ("   \n\t ", {}, -1.0),  # whitespace only
    ("Final answer: 72", {}, -1.0),  # under 50 characters (the Qwen3-4B/14B article's floor)
    ("最终答案：72", {}, -1.0),  # Chinese, under 50 characters
    (OK, {}, 0.0),  # long enough, nothing else enabled
    ("Final answer: 72", {"min_chars": 5}, 0.0),  # floor lowered
    ("", {"short_penalty": -2.0}, -2.0),  # penalty size configurable
    (WORDS, {"max_completion_length": 1000}, 0.0),  # ~500 tokens, well under the ramp (800)
    (WORDS, {"max_completion_length": 600, "overlong_buffer": 200}, -0.5),  # halfway down the ramp (400..600)
    (WORDS, {"max_completion_length": 500}, -1.0),  # at the limit: the full penalty
    (WORDS * 3, {"max_completion_length": 500}, -1.0),  # beyond: flat, not growing
    (WORDS, {"max_completion_length": 600, "overlong_buffer": 200, "overlong_penalty": 2.0}, -1.0),  # scaled
    ("<think>" + WORDS + "</think>Final answer: 72", {"think_budget": 1000}, 0.0),  # within budget
    ("<think>" + WORDS + "</think>Final answer: 72", {"think_budget": 250}, -0.5),  # 2x budget: full think penalty
    ("<think>" + WORDS + "</think>Final answer: 72", {"think_budget": 400}, -0.125),  # 25% over: quarter
    (WORDS + "</think>Final answer: 72", {"think_budget": 250}, -0.5),  # <think> opened in the prompt
    ("<think>" + WORDS, {"think_budget": 250}, -0.5),  # unclosed think counts to the end
    (WORDS, {"think_budget": 10}, 0.0),  # no think block: no think penalty
]


@pytest.mark.parametrize("completion,params,expected", CASES, ids=[f"{i}" for i in range(len(CASES))])
def test_length(completion, params, expected):
    assert length_penalty(completion, **params)[0] == pytest.approx(expected, abs=0.01)
    assert build_reward("length", params)(completions=[completion]) == [pytest.approx(expected, abs=0.01)]


@pytest.mark.parametrize(
    "text,low,high",
    [
        ("word " * 100, 120, 130),  # English: ~4 characters per token
        ("12345", 5, 5),  # digits: one token each (Qwen splits numbers into digits)
        ("一共卖了七十二个" * 3, 15, 17),  # Chinese: ~1.5 characters per token
        ("", 0, 0),
    ],
)
def test_estimate_tokens(text, low, high):
    assert low <= estimate_tokens(text) <= high


@pytest.mark.parametrize(
    "text,thought",
    [
        ("<think>abc</think>answer", "abc"),  # a whole block
        ("abc</think>answer", "abc"),  # opener in the prompt
        ("<think>abc", "abc"),  # never closed
        ("answer only", ""),  # no think block
    ],
)
def test_think_text(text, thought):
    assert think_text(text) == thought


def test_bad_buffer_is_rejected_when_built():
    with pytest.raises(ValueError, match="overlong_buffer"):
        build_reward("length", {"max_completion_length": 100, "overlong_buffer": 200})
