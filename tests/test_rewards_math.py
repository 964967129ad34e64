"""math_correctness: one commented case per edge, English and Chinese (runs in about a second)."""
from __future__ import annotations

import re
import signal
import threading

import pytest

from grpokit.families.answer_lines import TRICKS, prepare_row
from grpokit.rewards.math import answers_match, check_math, extract_final_answer, parse_gold, score_math
from grpokit.rewards.parsing import DEFAULT_MARKERS
from grpokit.rewards.registry import build_reward

R = "48/2 = 24 clips in May.\n48 + 24 = 72 clips in total.\n"  # honest reasoning lines
Z = "五月卖了 48/2 = 24 个。\n一共 48 + 24 = 72 个。\n"

# (completion, gold, expected reward, expected reason)
CASES = [
    # --- honest answers, the forms a model writes
    (R + "Final answer: 72", "72", 1.0, "correct"),
    (Z + "最终答案：72", "72", 1.0, "correct"),  # full-width colon marker
    (Z + "最终答案:72", "72", 1.0, "correct"),  # ASCII colon marker
    (R + "FINAL ANSWER: 72", "72", 1.0, "correct"),  # case-insensitive marker
    (R + "**Final answer:** 72", "72", 1.0, "correct"),  # markdown bold around the marker
    (R + "Final answer:\n72", "72", 1.0, "correct"),  # value on the next line
    (R + "So the total is \\boxed{72}.", "72", 1.0, "correct"),  # \boxed with no marker
    (R + "Final answer: \\boxed{72}", "72", 1.0, "correct"),  # boxed on the marker line is one answer
    (R + "That is \\boxed{72}.\nFinal answer: 72", "72", 1.0, "correct"),  # boxed and marker agree
    (R + "Final answer:   72  ", "72", 1.0, "correct"),  # whitespace
    (Z + "最终答案：７２", "72", 1.0, "correct"),  # full-width digits
    (Z + "最终答案：72。", "72", 1.0, "correct"),  # CJK full stop
    (R + "Final answer: 72.", "72", 1.0, "correct"),  # ASCII full stop
    (R + "Final answer: 1,234", "1234", 1.0, "correct"),  # thousands separator
    (Z + "最终答案：1，234", "1234", 1.0, "correct"),  # full-width thousands separator
    (R + "Final answer: $18", "18", 1.0, "correct"),  # dollar sign
    (R + "Final answer: $\\$18.00$", "18", 1.0, "correct"),  # LaTeX $...$ with an escaped dollar
    (R + "Final answer: \\(72\\)", "72", 1.0, "correct"),  # LaTeX \( \)
    (R + "Final answer: 18 dollars", "18", 1.0, "correct"),  # trailing unit word
    (R + "Final answer: 5 km", "5", 1.0, "correct"),  # trailing unit
    (R + "Final answer: 5kg", "5", 1.0, "correct"),  # glued unit
    (R + "Final answer: 72 \\text{ clips}", "72", 1.0, "correct"),  # \text{} unit
    (Z + "最终答案：72元", "72", 1.0, "correct"),  # measure word 元
    (Z + "最终答案：3 个", "3", 1.0, "correct"),  # measure word 个
    (Z + "最终答案：4只", "4", 1.0, "correct"),  # measure word 只
    (Z + "最终答案：100米", "100", 1.0, "correct"),  # 米
    (Z + "最终答案：2小时", "2", 1.0, "correct"),  # 小时
    (Z + "最终答案：12页", "12", 1.0, "correct"),  # 页
    (Z + "最终答案：7天", "7", 1.0, "correct"),  # 天
    (Z + "最终答案：9岁", "9", 1.0, "correct"),  # 岁
    (Z + "最终答案：30人", "30", 1.0, "correct"),  # 人
    (R + "Final answer: 25%", "25", 1.0, "correct"),  # percent sign as a unit
    (R + "Final answer: x = 72", "72", 1.0, "correct"),  # "x =" lead-in
    (R + "Final answer: 48 + 24 = 72", "72", 1.0, "correct"),  # worked equation: its result counts
    (Z + "最终答案：16-3-4=9个", "9", 1.0, "correct"),  # a chain of subtractions is not a range
    (R + "Final answer: 72 clips (48 in April and 24 in May)", "72", 1.0, "correct"),  # trailing note in words
    (R + "Final answer: 2.50", "2.5", 1.0, "correct"),  # trailing zero
    (R + "Final answer: 0.5", "1/2", 1.0, "correct"),  # decimal = fraction
    (R + "Final answer: 1/2", "0.5", 1.0, "correct"),  # fraction = decimal
    (R + "Final answer: \\frac{1}{2}", "0.5", 1.0, "correct"),  # LaTeX fraction
    (R + "Final answer: \\dfrac{3}{4}", "0.75", 1.0, "correct"),  # \dfrac
    (R + "Final answer: -3", "-3", 1.0, "correct"),  # negative
    (R + "Final answer: −3", "-3", 1.0, "correct"),  # Unicode minus
    (R + "Final answer: 2\\sqrt{3}", "\\sqrt{12}", 1.0, "correct"),  # symbolic, via math-verify
    (R + "Final answer: \\frac{\\pi}{2}", "\\pi/2", 1.0, "correct"),  # symbolic with a constant
    (R + "Final answer: 72", "Natalia sold 48/2 = 24 clips.\n#### 72", 1.0, "correct"),  # GSM8K gold
    (R + "Final answer: 72", 72, 1.0, "correct"),  # gold given as a number
    (R + "<think>\nlet me think\n</think>\nFinal answer: 72", "72", 1.0, "correct"),  # answer after think
    ("48/2 = 24...</think>\n最终答案：72", "72", 1.0, "correct"),  # Qwen3: <think> opened in the prompt
    # --- honest wrong answers and near misses
    (R + "Final answer: 73", "72", 0.0, "wrong"),  # wrong number
    (R + "Final answer: 390", "39", 0.0, "wrong"),  # contains the gold's digits
    (R + "Final answer: 3", "39", 0.0, "wrong"),  # contained in the gold
    (R + "Final answer: 93", "39", 0.0, "wrong"),  # digits rearranged
    (R + "Final answer: 3.9", "39", 0.0, "wrong"),  # decimal point moved
    (R + "Final answer: 3x", "3", 0.0, "wrong"),  # a glued variable is an expression, not a unit
    (R + "Final answer: \\sqrt{39}", "39", 0.0, "wrong"),  # an operator around the gold number
    (R + "Final answer: 9^{9^{9^{9}}}", "39", 0.0, "wrong"),  # exponent tower: never handed to sympy
    # --- refusals: the article's format-bonus exploit earns no credit
    (Z + "最终答案：不知道", "72", 0.0, "refusal"),
    (Z + "最终答案：无法确定", "72", 0.0, "refusal"),
    (Z + "最终答案：无法计算", "72", 0.0, "refusal"),
    (R + "Final answer: I don't know", "72", 0.0, "refusal"),
    (R + "Final answer: cannot be determined", "72", 0.0, "refusal"),
    (R + "Final answer: The answer cannot be determined from the information.", "72", 0.0, "refusal"),
    (R + "Final answer: unknown", "72", 0.0, "refusal"),
    # --- hedges: several values for one question
    (Z + "最终答案：71 或 72", "72", 0.0, "hedge"),  # 或
    (R + "Final answer: 71 or 72", "72", 0.0, "hedge"),  # or
    (R + "Final answer: 71, 72", "72", 0.0, "several_answers"),  # list
    (Z + "最终答案：71，72", "72", 0.0, "several_answers"),  # full-width comma list
    (R + "Final answer: 71 72", "72", 0.0, "several_answers"),  # space-separated
    (R + "Final answer: 3 apples and 72 pears", "72", 0.0, "several_answers"),  # two numbers in words
    (R + "Final answer: 71-73", "72", 0.0, "hedge"),  # range with a hyphen
    (R + "Final answer: 71~73", "72", 0.0, "hedge"),  # range with a tilde
    (Z + "最终答案：71到73", "72", 0.0, "hedge"),  # range 到
    (R + "Final answer: between 71 and 73", "72", 0.0, "hedge"),  # range in words
    (R + "Final answer: about 72", "72", 0.0, "hedge"),  # approximate
    (Z + "最终答案：约72", "72", 0.0, "hedge"),  # 约
    (Z + "最终答案：72左右", "72", 0.0, "hedge"),  # 左右
    (R + "Final answer: not 72", "72", 0.0, "hedge"),  # negated
    (Z + "最终答案：不是72", "72", 0.0, "hedge"),  # 不是
    (R + "Final answer: 72 \\pm 1", "72", 0.0, "hedge"),  # plus-minus
    (R + "Final answer: 72 (73 if rounded up)", "72", 0.0, "hedge"),  # a conditional second answer in a note
    (R + "Final answer: 71 or 72 = 72", "72", 0.0, "hedge"),  # a hedge before an equals sign still counts
    (R + "Final answer: 70 + 2 = 71-73", "72", 0.0, "hedge"),  # a range as the result of a calculation
    # --- an explanation after the value: the value counts, as with math-verify alone
    (R + "Final answer: 18 (not counting the eggs she eats)", "18", 1.0, "correct"),  # negation inside a note
    (R + "Final answer: $18 if she sells all the remaining eggs", "18", 1.0, "correct"),  # a condition, no value
    (R + "Final answer: 18 dollars, since she sells 9 eggs at $2 each", "18", 1.0, "correct"),  # a reason with numbers
    (R + "Final answer: 18, which is what she makes every day", "18", 1.0, "correct"),  # relative clause
    (R + "Final answer: $18 if she sells all 9 remaining eggs at $2", "18", 1.0, "correct"),  # condition with numbers
    (R + "Final answer: 18 — since 9 × 2 = 18", "18", 1.0, "correct"),  # dash, worked equation as the reason
    (R + "Final answer: 18 dollars because 16 - 3 - 4 = 9 eggs at $2", "18", 1.0, "correct"),  # arithmetic, no range
    (R + "Final answer: 18 dollars because 16 - 3 - 4 = 9 eggs", "18", 0.0, "hedge"),  # 9 stated, not derived
    (Z + "最终答案：18元，因为她每天卖9个鸡蛋", "18", 1.0, "correct"),  # 因为 after a full-width comma
    (Z + "最终答案：18元（不算她吃掉的鸡蛋）", "18", 1.0, "correct"),  # full-width parenthesis, 不算
    (Z + "最终答案：18元，如果她卖掉剩下的鸡蛋", "18", 1.0, "correct"),  # 如果: a condition with no value
    (R + "It is \\boxed{18}.\nFinal answer: 18 dollars, since she sells 9 eggs at $2", "18", 1.0, "correct"),  # agree
    # a premise with a bare number or an unknown unit has the shape of a second candidate: refused (math_clauses)
    (R + "Final answer: 18 dollars, since she sells 9 eggs", "18", 0.0, "hedge"),
    (R + "Final answer: 17 (since 16 + 2 = 18)", "18", 0.0, "hedge"),  # the gold hidden in a reason earns nothing
    (R + "Final answer: 17 dollars, so 18 in total", "18", 0.0, "hedge"),  # ... nor in a consequence (a 2nd value)
    # --- ... but an explanation may not hedge
    (R + "Final answer: 18 (or 19 if she sells one more)", "18", 0.0, "hedge"),  # "or" in a note
    (R + "Final answer: 18 (19 if rounded up)", "18", 0.0, "hedge"),  # a conditional second value
    (R + "Final answer: 18 if rounded down, 19 if rounded up", "18", 0.0, "hedge"),  # two conditions
    (R + "Final answer: 18 if she sells them all, otherwise 12", "18", 0.0, "hedge"),  # otherwise
    (R + "Final answer: 18 if rounded down; 19", "18", 0.0, "hedge"),  # a value after a condition
    (R + "Final answer: 18, maybe less", "18", 0.0, "hedge"),  # maybe
    (R + "Final answer: 18 (approximately)", "18", 0.0, "hedge"),  # approximately
    (R + "Final answer: 18, depending on how many eggs she eats", "18", 0.0, "hedge"),  # depending
    (R + "Final answer: 18 (not 19)", "18", 0.0, "hedge"),  # a negated second value
    (R + "Final answer: 18 (19 dollars)", "18", 0.0, "hedge"),  # a second value in a note
    (R + "Final answer: 16-20 (since she eats some)", "18", 0.0, "hedge"),  # a range before a reason
    (R + "Final answer: about 18, since she sells 9 eggs", "18", 0.0, "hedge"),  # approximate before a reason
    (R + "Final answer: not 18, because she eats some", "18", 0.0, "hedge"),  # negated before a reason
    (Z + "最终答案：18元，如果卖9个；20元如果卖10个", "18", 0.0, "hedge"),  # two conditions, Chinese
    (R + "Final answer: 18 dollars, 19 euros", "18", 0.0, "several_answers"),  # a comma before a number is a list
    (R + "Final answer: I don't know (since the price is not given)", "18", 0.0, "refusal"),  # refusal with a reason
    (R + "Final answer: 18 (I'm not sure)", "18", 0.0, "refusal"),  # a refusal in a note
    # --- several final answers
    (R + "Final answer: 71\nFinal answer: 72", "72", 0.0, "several_answers"),  # marker repeated, different
    (R + "It is \\boxed{71}.\nFinal answer: 72", "72", 0.0, "several_answers"),  # boxed disagrees with marker
    (R + "\\boxed{71} \\boxed{72}", "72", 0.0, "several_answers"),  # two boxes
    ("Final answer: 72\n" * 20, "72", 0.0, "several_answers"),  # more answers than an honest completion gives
    # --- think blocks
    ("<think>\nFinal answer: 72\n</think>\n", "72", 0.0, "no_answer"),  # answer only inside think
    ("<think>\nFinal answer: 72\n</think>\nI am not sure.", "72", 0.0, "no_answer"),  # ... and prose after
    ("<think>\n" + R + "Final answer: 72", "72", 0.0, "unclosed_think"),  # think never closed
    ("Final answer: 72\n<think>\nhmm", "72", 0.0, "unclosed_think"),  # answer before a think left open
    # --- no answer at all
    ("", "72", 0.0, "no_answer"),  # empty
    (R + "The answer is 72.", "72", 0.0, "no_answer"),  # no marker, no box
    (R + "Final answer: " + "9" * 300, "72", 0.0, "too_long"),  # a paragraph is not an answer
    # --- issue 44: honest answers with units written as symbols, conversions with "=", scientific notation, and
    # Roman numerals read as numbers (a second candidate in them is a hedge)
    (R + "Final answer: 25 °C", "25", 1.0, "correct"),  # a degree sign is a unit
    (R + "Final answer: 25°", "25", 1.0, "correct"),
    (R + "Final answer: 90^\\circ", "90", 1.0, "correct"),
    (R + "Final answer: 12 m/s", "12", 1.0, "correct"),  # a slash between unit symbols is "per"
    (R + "Final answer: 3 €/kg", "3", 1.0, "correct"),
    (R + "Final answer: 60 km/h", "60", 1.0, "correct"),
    (R + "Final answer: 25 °C (77 °F)", "25", 1.0, "correct"),  # a temperature converted (with its offset)
    (R + "Final answer: 25 °C, though 26 °F", "25", 0.0, "hedge"),  # ... or another one offered
    (R + "Final answer: 2 km = 2000 m", "2", 1.0, "correct"),  # a conversion with "=": the value comes first
    (R + "Final answer: 2 km = 3000 m", "2", 0.0, "hedge"),  # a false conversion offers another value
    (R + "Final answer: 12 = 3 × 4", "12", 1.0, "correct"),  # the value, then how it is made
    (R + "Final answer: 12 = 13", "12", 0.0, "hedge"),
    (R + "Final answer: 100 (= 10²)", "100", 1.0, "correct"),  # a restated power
    (R + "Final answer: 100 (= 10^{3})", "100", 0.0, "hedge"),
    (R + "Final answer: 1.5e3", "1500", 1.0, "correct"),  # scientific notation is one number
    (R + "Final answer: 1.5 × 10^3", "1500", 1.0, "correct"),
    (R + "Final answer: 2.5 \\times 10^{-3}", "0.0025", 1.0, "correct"),
    (R + "Final answer: 100, i.e. 1e2", "100", 1.0, "correct"),
    (R + "Final answer: 12 (XII)", "12", 1.0, "correct"),  # a Roman numeral restating the value
    (R + "Final answer: 12 (or XIII)", "12", 0.0, "hedge"),  # ... or offering another: not paid
    # --- issue 53: a unit's power written with a caret, compound units converted, Roman numerals in Unicode and
    # one-letter ones in a calculation
    (R + "Final answer: 9.8 m/s^2", "9.8", 1.0, "correct"),  # as "9.8 m/s²" is
    (R + "Final answer: 10 m^2", "10", 1.0, "correct"),
    (R + "Final answer: 5 cm^3", "5", 1.0, "correct"),
    (R + "Final answer: 2 s^-1", "2", 1.0, "correct"),
    (R + "Final answer: 9.8 m s^{-2}", "9.8", 1.0, "correct"),
    (R + "Final answer: 3x^2", "3x^2", 1.0, "correct"),  # a variable glued to its number: an expression still
    (R + "Final answer: 9.8 m/s^2, though 10 m/s^2", "9.8", 0.0, "hedge"),
    (R + "Final answer: 36 km/h = 10 m/s", "36", 1.0, "correct"),  # km per hour is 1000/3600 m per second
    (R + "Final answer: 20 m/s, i.e. 72 km/h", "20", 1.0, "correct"),
    (R + "Final answer: 10 m/s (36 km/h)", "10", 1.0, "correct"),
    (R + "Final answer: 20 m/s (73 km/h)", "20", 0.0, "hedge"),  # a conversion that is not one
    (R + "Final answer: 36 km/h, though 11 m/s", "36", 0.0, "hedge"),
    (R + "Final answer: 45° (π/4 rad)", "45", 1.0, "correct"),  # radians with π: half turns
    (R + "Final answer: 90 degrees (\\pi/2 radians)", "90", 1.0, "correct"),
    (R + "Final answer: 45° (π/3 rad)", "45", 0.0, "hedge"),
    (R + "Final answer: 12, or Ⅻ+Ⅰ", "12", 0.0, "hedge"),  # Unicode's Roman numerals are numbers: 13
    (R + "Final answer: 12, or XII + I", "12", 0.0, "hedge"),  # a one-letter numeral in a calculation too
    (R + "Final answer: 12, or Ⅻ", "12", 1.0, "correct"),  # the value restated
    (R + "Final answer: Ⅻ", "12", 1.0, "correct"),
    (R + "Final answer: 12 (I think so)", "12", 1.0, "correct"),  # "I" alone is a word
    # --- gold answers that cannot be parsed: not applicable
    (R + "Final answer: 72", "", None, "gold_unparseable"),
    (R + "Final answer: 72", None, None, "gold_unparseable"),
    (R + "Final answer: 72", "#### ", None, "gold_unparseable"),
]


@pytest.mark.parametrize("completion,gold,reward,reason", CASES, ids=[f"{i}-{c[0][-24:]!r}" for i, c in enumerate(CASES)])
def test_math_correctness(completion, gold, reward, reason):
    verdict = check_math(completion, gold)
    assert (verdict.reward, verdict.reason) == (reward, reason)
    assert score_math(completion, gold) == reward


@pytest.mark.parametrize(
    "gold,parsed",
    [
        ("Natalia sold 48/2 = <<48/2=24>>24 clips.\n#### 72", "72"),  # GSM8K rationale + #### line
        ("#### 1,000", "1,000"),  # separators kept; the comparison handles them
        (18, "18"),  # numbers
        ("  42 ", "42"),  # whitespace
        ("", None),  # empty
    ],
)
def test_parse_gold(gold, parsed):
    assert parse_gold(gold) == parsed


def test_extract_and_match_agree_with_score():
    # Evaluation calls extract_final_answer + answers_match; training calls score_math. Same verdicts.
    for completion, gold, reward, _ in CASES:
        if reward is None:
            continue
        predicted = extract_final_answer(completion)
        assert (1.0 if answers_match(predicted, parse_gold(gold)) else 0.0) == reward, completion[-40:]


def test_custom_markers():
    # A recipe's own marker replaces the defaults: "Final answer:" is then just text.
    score = build_reward("math_correctness", {"markers": ["Result:"]})
    assert score(completions=[R + "Result: 72", R + "Final answer: 72"], answer=["72", "72"]) == [1.0, 0.0]
    assert DEFAULT_MARKERS == ("Final answer:", "最终答案：", "最终答案:")


@pytest.mark.parametrize(
    "completion, reason",
    [
        ("x" * 100_000 + "\nFinal answer: 72", "correct"),  # long reasoning, answer at the end
        ("Final answer: 72\n" * 50_000, "several_answers"),  # the marker repeated to the end
        ("\\boxed{" * 30_000, "several_answers"),  # unbalanced boxes
        ("{" * 100_000, "no_answer"),  # braces only
        ("<think>" + "a" * 100_000, "unclosed_think"),  # unclosed think
        ("Final answer: " + "(" * 100_000, "too_long"),  # a 100k-char answer line
        ("7" * 100_000, "no_answer"),  # one huge number
    ],
    ids=["long", "marker-repeated", "boxes", "braces", "think", "long-line", "big-number"],
)
def test_bounded_time_on_100k_chars(completion, reason):
    # A catastrophic regex or a parse of the whole text would take minutes on 100k characters; the scorer reads a
    # bounded tail, so it ends in milliseconds. The deadline only catches a hang (its speed is measured by
    # benchmarks/bench_math_correctness.py, not asserted here).
    def hung(signum, frame):
        raise TimeoutError("check_math did not finish within 30 s on a 100k-character completion")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)
    try:
        verdict = check_math(completion, "72")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert verdict.reason == reason


def test_thread_safe_with_symbolic_answers():
    # math-verify's own timeout uses SIGALRM and raises outside the main thread; ours must not.
    results, errors = [], []

    def work():
        try:
            results.append(score_math(R + "Final answer: 2\\sqrt{3}", "\\sqrt{12}"))
        except Exception as e:  # noqa: BLE001 - collected to fail the test in the main thread
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and results == [1.0] * 4


def test_registered_reward_returns_null_for_unparseable_gold():
    fn = build_reward("math_correctness")
    assert fn(prompts=None, completions=[R + "Final answer: 72", R + "Final answer: 72"], answer=["72", ""]) == [1.0, None]


# The reward audit's tricks, each with an explanation added to every answer line: an explanation
# may not turn a loophole into credit. The honest right answer with the same explanation still scores.
_AUDIT_ROWS = [
    {"question": "Janet's ducks lay 16 eggs. She eats 3 and bakes with 4. She sells the rest at $2. How much?",
     "answer": "16 - 3 - 4 = <<16-3-4=9>>9 eggs are left.\n9 * 2 = <<9*2=18>>18 dollars.\n#### 18"},
    {"question": "小明有 3 个苹果，又买了 36 个，一共有几个？", "answer": "39"},
]
_EXPLANATIONS = [
    " (not counting the eggs she eats)",  # the first example
    " if she sells all the remaining eggs",  # a condition
    ", since that is what the numbers give",  # a reason
    "，因为这是计算的结果",  # a Chinese reason
]


@pytest.mark.parametrize("explanation", _EXPLANATIONS)
@pytest.mark.parametrize("row", _AUDIT_ROWS, ids=["en", "zh"])
def test_audit_tricks_with_an_explanation_earn_nothing(row, explanation):
    r = prepare_row(row, DEFAULT_MARKERS, think=False, min_lines=2)

    def explain(text: str) -> str:
        return re.sub(r"((?:Final answer:|最终答案：)[^\n]*)", lambda m: m.group(1) + explanation, text)

    assert score_math(explain(r.honest(r.gold)), row["answer"]) == 1.0  # control: the fix is in place
    assert score_math(explain(r.honest(r.num(1))), row["answer"]) == 0.0
    scored = {name: score_math(explain(t.build(r)), row["answer"]) for name, t in TRICKS.items() if t.build(r) is not None}
    assert scored and {name: s for name, s in scored.items() if s} == {}


# math-verify reads what it can of an expression and may skip the rest: compared with a number, an answer goes to
# it only when it reads all of it, so a second number behind LaTeX it skips is no hidden hedge (issue 34).
_SKIPPED_BY_MATH_VERIFY = [" \\overline{", " \\underline{", " \\color{red}{", " \\phantom{", " \\tag{", " \\label{",
                           " \\hbox{", " \\mathrm{", " \\pmod{", " \\to ", " \\Rightarrow ", " \\implies ", " \\vee ",
                           " \\mid ", " \\| ", " \\dots ", " · ", " ⋯ ", " \u200b", " \\hspace{1em} ", "{", "}"]


@pytest.mark.parametrize("sep", _SKIPPED_BY_MATH_VERIFY)
def test_a_second_number_behind_latex_math_verify_skips_earns_nothing(sep):
    for tail in ("13", "13}", "(13)", "13 is also possible"):
        assert score_math(R + f"Final answer: 12{sep}{tail}", "12") == 0.0, tail


@pytest.mark.parametrize("gold,value", [("18元", 18), ("26厘米", 26), ("1,225 stamps", 1225), ("1/2", 0.5), ("-3", -3),
                                        ("0.5", 0.5), ("$4", 4), ("10 cups", 10), ("$3.50", 3.5), ("2,125", 2125)])
def test_gold_answers_the_parser_accepts_keep_their_value(gold, value):
    # data check reads gold answers with parse_gold + parse_number: the rule of shape for hedges must not move them
    from grpokit.rewards.math import parse_number
    assert parse_number(parse_gold(gold)) == value
