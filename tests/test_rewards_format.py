"""format: one commented case per edge, English and Chinese."""
from __future__ import annotations

import pytest

from grpokit.rewards.format import check_format
from grpokit.rewards.registry import build_reward

R = "48/2 = 24 clips in May.\n48 + 24 = 72 clips in total.\n"
Z = "五月卖了 48/2 = 24 个。\n一共 48 + 24 = 72 个。\n"
T = "<think>\n" + R + "</think>\n"

# (completion, params, expected ok, expected reason fragment)
CASES = [
    # --- well formed
    (R + "Final answer: 72", {}, True, ""),
    (Z + "最终答案：72", {}, True, ""),
    (R + "**Final answer:** 72", {}, True, ""),  # markdown decoration
    (R + "\n\nFinal answer: 72\n\n", {}, True, ""),  # blank lines do not count
    ("One line of reasoning.\nFinal answer: 72", {"min_reasoning_lines": 1}, True, ""),  # the demo's setting
    (T + "Final answer: 72", {"require_think": True}, True, ""),  # Qwen3 thinking mode
    (R + "</think>\nFinal answer: 72", {"require_think": True}, True, ""),  # <think> opened in the prompt
    (T + "Summing up.\nFinal answer: 72", {"require_think": True}, True, ""),  # prose after think
    (T + "Final answer: 72", {}, True, ""),  # a closed think is fine without require_think
    (R + "Result: 72", {"markers": ["Result:"]}, True, ""),  # custom marker
    # --- reasoning missing or fake
    ("Final answer: 72", {}, False, "reasoning line"),  # marker with no reasoning
    ("Only one.\nFinal answer: 72", {"min_reasoning_lines": 2}, False, "reasoning line"),  # too few lines
    ("#$%^&*\n!!!???...\n@@@ ### ~~~\nFinal answer: 72", {}, False, "symbols"),  # symbol garbage
    (R + "Let me check again. " * 300 + "\nFinal answer: 72", {}, False, "padding"),  # repeated padding
    ("Check.\n" * 300 + "Final answer: 72", {}, False, "padding"),  # repeated lines
    # --- the answer line
    ("", {}, False, "no final-answer line"),  # empty
    (R + "The answer is 72.", {}, False, "no final-answer line"),  # no marker
    (R + "Final answer:", {}, False, "not a single value"),  # marker with nothing after it
    (Z + "最终答案：不知道", {}, False, "refusal"),  # the article's format-bonus exploit
    (R + "Final answer: I don't know", {}, False, "refusal"),  # English refusal
    (Z + "最终答案：71 或 72", {}, False, "hedge"),  # hedge
    (R + "Final answer: 72 (or 73 if rounded up)", {}, False, "hedge"),  # a hedge inside an explanation
    (R + "Final answer: 72 (not counting the ones she gave away)", {}, True, ""),  # an explanation is not a hedge
    (R + "Final answer: 71, 72", {}, False, "several_answers"),  # list
    # --- text answers (the text-answer audit's hedges, grpokit.audit.text): several candidates without a hedge word
    ("The capital is a city I know.\nFinal answer: Berlin, Paris, Rome", {}, False, "several_answers"),  # a list
    ("The capital is a city I know.\nFinal answer: Berlin; Paris; Rome", {}, False, "several_answers"),
    ("The capital is a city I know.\nFinal answer: Berlin/Paris", {}, False, "hedge"),  # a slash
    ("The capital is a city I know.\nFinal answer: Berlin / Paris", {}, False, "hedge"),
    ("The capital is a city I know.\nFinal answer: Paris, though Lyon is also possible", {}, False, "hedge"),
    ("The capital is a city I know.\nFinal answer: Paris", {}, True, ""),  # one value, as written
    ("The capital is a city I know.\nFinal answer: The answer is Paris.", {}, True, ""),
    ("The capital is a city I know.\nFinal answer: Washington, D.C.", {}, True, ""),  # two items are one value
    ("The capital is a city I know.\nFinal answer: Paris, France", {}, True, ""),
    ("The unit is a rate.\nFinal answer: km/h", {}, True, ""),  # short words over a slash: a unit, one value
    ("The protocol is old.\nFinal answer: TCP/IP", {}, True, ""),
    (R + "Final answer: 71\nFinal answer: 72", {}, False, "final-answer lines"),  # marker repeated
    (R + "Final answer: 72\nHope this helps!", {}, False, "after the final-answer line"),  # trailing text
    (R + "I think the Final answer: 72", {}, False, "does not start with the marker"),  # marker mid-line
    (R + "It is \\boxed{71}.\nFinal answer: 72", {}, False, "several different"),  # a box that disagrees
    # --- think blocks
    ("<think>\n" + R + "Final answer: 72", {}, False, "never closed"),  # unclosed think
    (T + T + "Final answer: 72", {}, False, "several think blocks"),  # two think blocks
    ("</think>\n<think>\n" + R + "Final answer: 72", {}, False, "</think> before <think>"),  # tags swapped
    ("Hi <think>\n" + R + "</think>\nFinal answer: 72", {}, False, "text before <think>"),  # stray prefix
    (R + "Final answer: 72", {"require_think": True}, False, "no </think>"),  # thinking mode, no think
    ("<think>\n</think>\n" + R + "Final answer: 72", {"require_think": True}, False, "empty think"),  # empty think
    ("<think>\n" + R + "Final answer: 72\n</think>\n", {}, False, "no final-answer line"),  # answer only in think
]


@pytest.mark.parametrize("completion,params,ok,reason", CASES, ids=[f"{i}-{c[0][-24:]!r}" for i, c in enumerate(CASES)])
def test_format(completion, params, ok, reason):
    verdict = check_format(completion, **{k: tuple(v) if k == "markers" else v for k, v in params.items()})
    assert verdict.ok is ok
    assert reason in verdict.reason
    assert build_reward("format", params)(completions=[completion]) == [1.0 if ok else 0.0]


def test_reasoning_in_think_counts_towards_min_lines():
    # Qwen3 puts the reasoning in the think block; the answer part may be the answer line alone.
    assert check_format(T + "Final answer: 72", min_reasoning_lines=2, require_think=True).ok


# The demo's prompt shows a worked example; without refill a policy learned to repeat it for every question.
EXAMPLE_PROMPT = [{"role": "system", "content": "Answer in two lines. Example:\n12 + 7 = 19\nFinal answer: 19"},
                  {"role": "user", "content": "What is 34 - 13?"}]


@pytest.mark.parametrize("completion,ok", [
    ("12 + 7 = 19\nFinal answer: 19", False),  # the example, verbatim
    ("  12 + 7 = 19\n\nFinal answer: 19  ", False),  # spacing does not hide it
    ("Let me see.\n12 + 7 = 19\nFinal answer: 19", False),  # a line put in front does not either
    ("34 - 13 = 21\nFinal answer: 21", True),  # an honest answer in the example's shape
    ("34 - 13 = 19\nFinal answer: 19", True),  # wrong, but an attempt at this question: correctness judges it
])
def test_repeating_the_prompts_example_earns_no_format_bonus(completion, ok):
    fmt = build_reward("format")
    assert fmt(prompts=[EXAMPLE_PROMPT], completions=[completion]) == [1.0 if ok else 0.0]
    assert fmt.scorer.explain(completion, prompt=EXAMPLE_PROMPT)["reason"] == (
        "ok" if ok else "repeats the prompt's worked example")


def test_prompt_copies_allowed_when_switched_off_or_no_prompt_is_known():
    copy = "12 + 7 = 19\nFinal answer: 19"
    assert build_reward("format", {"refuse_prompt_copies": False})(prompts=[EXAMPLE_PROMPT], completions=[copy]) == [1.0]
    assert build_reward("format")(completions=[copy]) == [1.0]  # `grpokit rewards score` rows without a prompt
    plain = "Solve it. Example:\n12 + 7 = 19\nFinal answer: 19\n\nWhat is 34 - 13?"  # a plain-text template
    assert build_reward("format")(prompts=[plain], completions=[copy]) == [0.0]
