"""An answer line read as written (issue 67, item 1): one rule (grpokit.rewards.parsing.answer_lines) for every
reward that reads answer lines (math_correctness, countdown, format), each case from the hostile re-test."""
from __future__ import annotations

import pytest

from grpokit.rewards.countdown import check_countdown
from grpokit.rewards.format import check_format
from grpokit.rewards.math import check_math
from grpokit.rewards.parsing import DEFAULT_MARKERS, MAX_ANSWER_CHARS, answer_key, answer_lines

N, T = [3, 4, 7], 16  # (7 - 3) * 4 = 16
R = "7 - 3 = 4\n4 * 4 = 16\n"  # a reasoning line, for the format reward


# (id, text, the values answer_lines reads)
LINES = [
    ("plain", "Final answer: 72", ["72"]),
    ("bold marker", "**Final answer:** 72", ["72"]),
    ("bold line", "**Final answer: 72**", ["72"]),
    ("bold value", "Final answer: **72**", ["72"]),
    ("italic value", "Final answer: *72*", ["72"]),
    ("heading", "## Final answer: 72", ["72"]),
    ("bold marker, colon outside", "**Final Answer**: 72", ["72"]),
    ("two values in italics are not one wrapped value", "Final answer: *72* *73*", ["*72* *73*"]),
    ("list item, bold marker", "- **Final answer:** 72", ["72"]),
    ("a bullet is not emphasis", "* Final answer: 3 * 4", ["3 * 4"]),
    ("bold marker, value on the next line, bold", "**Final answer:**\n**72**", ["72"]),
    ("emphasis that closes nothing is kept", "Final answer: 12 *(13 also works)*", ["12 *(13 also works)*"]),
    ("underscores of a name are kept", "Final answer: __import__('os')", ["__import__('os')"]),
    ("a power is kept", "Final answer: 2**3", ["2**3"]),
    ("a marker mid-line is prose", "Before I give the final answer: let me try.\nFinal answer: 72", ["72"]),
    ("a custom marker with markdown of its own", "#### 72", None),  # see test_marker_with_decoration
]


@pytest.mark.parametrize("text, values", [c[1:] for c in LINES if c[2] is not None],
                         ids=[c[0] for c in LINES if c[2] is not None])
def test_answer_lines_values(text, values):
    assert [v for _, _, v in answer_lines(text, DEFAULT_MARKERS)] == values


def test_marker_with_decoration():
    # A marker made of decoration characters still matches (the decoration before it is optional).
    assert [v for _, _, v in answer_lines("#### 72", ("####",))] == ["72"]


def test_value_is_never_cut():
    # Whatever follows enough whitespace is part of the value: the reward sees it all and refuses it as too long.
    value = "72" + " " * 200 + "or 73"
    assert answer_lines("Final answer: " + value, DEFAULT_MARKERS)[0][2] == value


def test_answer_key_spacing():
    assert answer_key("(7-3)*4") == answer_key("( 7 - 3 ) * 4") == answer_key("(7 - 3) * 4.")
    assert answer_key("3 4") != answer_key("34")  # a space between two digits separates them


# (id, completion, countdown reward, countdown reason key) over [3, 4, 7], target 16
COUNTDOWN = [
    ("a hedge behind 194 spaces is read, and refused as too long",
     "Final answer: (7-3)*4" + " " * 194 + "+ 3", 0.0, "too_long"),
    ("a bold marker", "**Final answer:** (7 - 3) * 4", 1.0, ""),
    ("a bold line", "**Final answer: (7 - 3) * 4**", 1.0, ""),
    ("a bold value", "Final answer: **(7 - 3) * 4**", 1.0, ""),
    ("a bold marker, colon outside", "**Final Answer**: (7 - 3) * 4", 1.0, ""),
    ("a marker mid-line is prose", "Before I give the final answer: let me try 3+4+7.\nFinal answer: (7 - 3) * 4",
     1.0, ""),
    ("the same answer written twice with other spacing", "Final answer: (7-3)*4\nFinal answer: (7 - 3) * 4", 1.0, ""),
    ("two different answers", "Final answer: (7-3)*4\nFinal answer: 3 + 4 + 7", 0.0, "several_answers"),
    ("a claimed result judged by its value", "Final answer: (7-3)*4 = 16.0", 1.0, ""),
    ("a wrong claimed decimal result", "Final answer: (7-3)*4 = 16.5", 0.0, "wrong_claim"),
    ("a claimed result with words", "Final answer: (7-3)*4 = 16 apples", 0.0, "not_an_expression"),
]


@pytest.mark.parametrize("completion, reward, reason", [c[1:] for c in COUNTDOWN], ids=[c[0] for c in COUNTDOWN])
def test_countdown_reads_the_line_as_written(completion, reward, reason):
    v = check_countdown(completion, N, T)
    assert (v.reward, v.reason.split(":")[0]) == (reward, reason), v


# (id, completion, gold, math reward, reason)
MATH = [
    ("a hedge behind 200 spaces is read, and refused as too long", "Final answer: 72" + " " * 200 + "or 73", "72",
     0.0, "too_long"),
    ("a hedge behind 150 spaces is a hedge", "Final answer: 72" + " " * 150 + "or 73", "72", 0.0, "hedge"),
    ("a bold marker", "**Final answer:** 72", "72", 1.0, "correct"),
    ("a bold line", "**Final answer: 72**", "72", 1.0, "correct"),
    ("a bold marker, colon outside", "**Final Answer**: 72", "72", 1.0, "correct"),
    ("a second answer under a bold marker, colon outside", "**Final answer**: 73\nFinal answer: 72", "72", 0.0,
     "several_answers"),
    ("two values in italics", "Final answer: *72* *73*", "72", 0.0, "several_answers"),
    ("a hedge between bold values", "**Final answer:** **72** or **73**", "72", 0.0, "hedge"),
    ("a marker mid-line is prose", "Before I give the final answer: 5\nFinal answer: 72", "72", 1.0, "correct"),
    ("the same expression twice with other spacing", "Final answer: x+1\nFinal answer: x + 1", "x+1", 1.0,
     "correct"),
    ("units with *", "Final answer: 3 kg*m^2", "3", 1.0, "correct"),
    ("N*m", "Final answer: 3 N*m", "3", 1.0, "correct"),
    ("units with powers and spaces", "Final answer: 12 kg m^2 s^-2", "12", 1.0, "correct"),
    ("scientific notation with a unit per a power", "Final answer: 1.2e3 kg/m^3", "1200", 1.0, "correct"),
    ("units over a bracketed product", "Final answer: 4 kJ/(kg·K)", "4", 1.0, "correct"),
    ("a small number in e notation", "Final answer: 6.67e-5", "0.0000667", 1.0, "correct"),
    ("e notation with a unit", "Final answer: 1.6e-19 C", "1.6e-19", 1.0, "correct"),
    ("e notation, wrong exponent", "Final answer: 1.6e-18 C", "1.6e-19", 0.0, "wrong"),
    ("a product of variables is not a unit", "Final answer: 3x*y", "3", 0.0, "wrong"),
    ("a spaced product of variables is not a unit", "Final answer: 5 a*b", "5", 0.0, "wrong"),
    ("units over a bracketed product, spaced", "Final answer: 3 kg/(m s)", "3", 1.0, "correct"),
    ("a unit product then a number", "Final answer: 3 kg*13", "3", 0.0, "wrong"),
    ("a second number after a unit product", "Final answer: 3 N*m, or 4", "3", 0.0, "hedge"),
]


@pytest.mark.parametrize("completion, gold, reward, reason", [c[1:] for c in MATH], ids=[c[0] for c in MATH])
def test_math_reads_the_line_as_written(completion, gold, reward, reason):
    v = check_math(completion, gold)
    assert (v.reward, v.reason) == (reward, reason), v


@pytest.mark.parametrize("line", ["**Final answer:** 72", "**Final answer: 72**", "Final answer: **72**",
                                  "**Final answer**: 72"])
def test_format_reads_emphasis_alike(line):
    assert check_format(R + line).ok


def test_format_marker_mid_line_is_prose():
    # One answer line, the last; the marker inside a reasoning line is not a second one.
    assert check_format("Before I give the final answer: let me check.\n" + R + "Final answer: 72").ok
    assert check_format(R + "I think the Final answer: 72").reason == "final-answer line does not start with the marker"


def test_a_long_run_of_stars_is_not_emphasis():
    # Emphasis is 1 to 3 marks: 50,000 stars round a value do not unwrap into it; the line is too long.
    text = "Final answer: " + "*" * 50_000 + "3" + "*" * 50_000
    assert check_math(text, "3").reason == "too_long"
    assert check_countdown(text, [3, 4], 7).reason.startswith("too_long")


def test_too_long_is_named():
    v = check_countdown("Final answer: " + "9 + 7 " + " " * MAX_ANSWER_CHARS + "- 3", [3, 4, 7, 9], 16)
    assert v.reason.startswith("too_long")
