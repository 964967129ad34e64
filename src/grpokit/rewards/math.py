"""Math answers: extract the final answer from a completion and compare it with the gold one.

This module is the single verifier used by the `math_correctness` reward and by
evaluation (`grpokit.evaluation`), so training and evaluation cannot drift apart.
`check_math` gives the verdict with its reason; `score_math` is its reward;
`extract_final_answer` + `answers_match` give the same answer in two steps.

Covered:
- answers after the LAST `</think>` only; an unclosed `<think>` gives no answer;
- answer lines `Final answer:`, `最终答案：`/`最终答案:` (case-insensitive, at a line's start after markdown
  decoration, emphasis around the value dropped: parsing.answer_lines; the value may sit on the next line) and
  `\\boxed{...}`; several candidates must all agree (spacing aside), otherwise there is no answer ("several
  answers");
- equivalence through whitespace, CJK and ASCII punctuation, full-width
  characters (NFKC), thousands separators, `$`, `$...$`/`\\(...\\)`, `\\text{}`
  units, trailing units and measure words (元 个 只 米 小时 km kg dollars ...), products and powers of units
  (`3 N*m`, `12 kg m^2 s^-2`, `4 kJ/(kg·K)`), scientific notation written out exactly (`6.67e-5`),
  2.50 = 2.5, 1/2 = 0.5 = \\frac{1}{2}; a worked equation counts by its last
  side ("48 + 24 = 72"), a trailing note in words is dropped ("72 (in May)"); other forms (2\\sqrt{3} = \\sqrt{12},
  sets, expressions) through math-verify;
- an explanation after a lone number is not part of the value, as with
  math-verify alone: "18 (not counting the eggs she eats)", "$18 if she sells
  all the remaining eggs", "18 dollars, since she sells 9 eggs at $2", "18元，因为..." all state 18;
- a final answer is ONE value, optionally its unit, conversions of it and an explanation: what follows the
  value on its line, what follows a `\\boxed{}` on its line, and the lines right after the answer line (same
  paragraph, up to 3) may restate, convert or derive the value but not offer another one. Every number there
  must be the value, the value in another unit ("12 hours, i.e. 720 minutes"), a quantity of another known
  dimension ("18元，因为她每天卖9个鸡蛋"), part of a true equation ("18 — since 9 × 2 = 18") or an operand of a
  derivation that reaches the value ("12, which is 3 more than 9"); any other number is a second candidate
  and scores 0 ("hedge") in any language, whatever the words ("12, though 13 is possible", "12, that is 13",
  "12, aunque 13 también es posible", "12 (13 for 2 people)", "Final answer: 12" + "Though 13 is also
  possible."): math_clauses, by shape, no list of concession words (the audit tries this family,
  grpokit.families.answer_lines.HEDGE_CLAUSES);
- no credit for refusals (不知道, I don't know ...), hedges in the value itself (`38 或 39`, `38, 39`, ranges
  including `38-40`, "about 39", "not 39"), doubt after it ("18, maybe less", "18 (approximately)"), or a
  number that only contains or is contained in the gold one (390 or 3 for 39: numbers are whole tokens);
- superscripts are powers: "4²" is 16, never 42 (NFKC alone would read "42"); after a letter ("12 m²") they
  belong to the unit; markdown emphasis is text ("12 *(13 also works)*");
- an expression compared with a number answer goes to math-verify only when math-verify reads all of it
  (`_plain_math`): it would read 12 from "12 \\overline{13}" or "12 \\to (13)" and skip the rest.

Bounded time and thread safety: the completion is scanned linearly, at most
`_MAX_CANDIDATES` answers are looked at, an answer longer than
`_MAX_ANSWER_CHARS` earns nothing, and math-verify runs with its SIGALRM
timeout disabled (it only works in the main thread) on screened input only
(`_symbolic_safe`: short, no exponent towers or huge factorials, which are
what can make sympy run for minutes).

Not covered: answers given only in words ("thirty-nine"), unit conversion between the answer and the gold
one (2 hours vs 120 minutes), percent vs fraction (50% vs 0.5), mixed numbers ("1 1/2"), answers with no marker
and no \\boxed, a second value in a condition with no punctuation ("39 if rounded down and 40 up" reads as 39;
only the first number is compared, so it earns what "39" alone earns), a second candidate in words ("39,
though forty is possible"), and what math_clauses lists as undecidable by shape: a premise named by a bare
number ("7, since she also eats 3") reads as a hedge (the conservative reading: a reward that pays a hedge
teaches hedging).
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from fractions import Fraction

# math-verify (sympy) for symbolic answers, screened and bounded: math_symbolic.py
from grpokit.rewards.math_symbolic import symbolic_equal, symbolic_parse
# One answer's value, read (units, separators, LaTeX, hedges, a second candidate after it): math_values.py
from grpokit.rewards.math_values import TRAILING_PUNCT, classify_answer, clean_answer, parse_number
from grpokit.rewards.parsing import (DEFAULT_MARKERS, MAX_ANSWER_CHARS, MAX_CANDIDATES, answer_key, answer_markers,
                                     answer_region, boxed_values)
from grpokit.rewards.parsing import answer_lines as _marker_values
from grpokit.rewards.registry import describe

_MAX_ANSWER_CHARS = MAX_ANSWER_CHARS  # also bounds the symbolic path
_MAX_CANDIDATES = MAX_CANDIDATES

_GSM8K_GOLD = re.compile(r"####\s*([^\n]+?)\s*$")


@dataclass(frozen=True)
class MathVerdict:
    """The outcome of checking one completion: reward, why, and what was compared."""

    reward: float | None  # 1.0 / 0.0, None when the gold answer cannot be parsed
    reason: str  # correct | wrong | no_answer | unclosed_think | several_answers | refusal | hedge | too_long | gold_unparseable
    predicted: str | None  # the extracted final answer (truncated), None when there is none
    gold: str | None  # the parsed gold answer


# ---------------------------------------------------------------- extraction


def _candidate_spans(text: str, markers: tuple[str, ...]) -> tuple[list[tuple[int, int, str]], str] | None:
    """(start, end, value) of each final answer in the answer region; a `\\boxed{}` outside an answer line keeps
    what follows it on its line ("\\boxed{12}, though 13 is possible"), up to the next answer: as the rest of the
    line for a number (its unit: "\\boxed{12} hours, i.e. 720 minutes"), after a "\\n" for an expression, whose
    words are no part of it ("\\boxed{2\\sqrt{3}} square units")."""
    region = answer_region(text)
    if region is None:
        return None
    lines = _marker_values(region, tuple(markers))
    boxed = boxed_values(region, _MAX_CANDIDATES - len(lines))
    # A \boxed inside an answer line is that line's value, not a second answer.
    boxed = [(s, v) for s, v in boxed if not any(a <= s < b for a, b, _ in lines)]
    starts = sorted([a for a, _, _ in lines] + [s for s, _ in boxed])
    spans = [(a, b, v) for a, b, v in lines]
    for s, v in boxed:
        close = region.find("{", s) + len(v) + 2  # after the box's closing brace
        eol = region.find("\n", close)
        stop = min([len(region) if eol < 0 else eol] + [a for a in starts if a > s])
        rest = region[close:stop][: max(0, _MAX_ANSWER_CHARS - len(v) - 8)].rstrip()  # within the bound
        sep = "" if parse_number(v) is not None or not rest.strip(TRAILING_PUNCT + "$") else "\n"
        spans.append((s, stop, f"\\boxed{{{v}}}{sep}{rest}"))
    return sorted(spans), region


def extract_final_answer(text: str, markers: tuple[str, ...] = DEFAULT_MARKERS) -> str | None:
    """The completion's final answer, or None when there is none or its answers disagree.

    The lines right after the final answer (the same paragraph) come with it after a "\\n": they are part of the
    answer (`classify_answer` reads them), so "Final answer: 12" + "Though 13 is also possible." is not 12. An
    earlier answer that agrees but hedges ("\\boxed{12}, though 13 is possible" before "Final answer: 12") is
    the one returned, so that its hedge counts."""
    answer, _reason = _single_answer(text, tuple(markers))
    return answer


def _single_answer(text: str, markers: tuple[str, ...]) -> tuple[str | None, str]:
    found = _candidate_spans(text, markers)
    if found is None:
        return None, "unclosed_think"
    spans, region = found
    candidates = [v for _, _, v in spans]
    if not candidates:
        return None, "no_answer"
    if len(candidates) > _MAX_CANDIDATES:
        return None, "several_answers"
    keys = {_candidate_key(c) for c in candidates}
    if len(keys) > 1:
        return None, "several_answers"
    # Each answer with the lines after it, up to the next answer: a hedge between two answer lines that agree
    # ("Final answer: 12" / "Though 13 is also possible." / "Final answer: 12") counts too.
    full = []
    for i, (_, end, value) in enumerate(spans):
        after = _following_lines(region, end, spans[i + 1][0] if i + 1 < len(spans) else len(region))
        value = value.strip()
        full.append(value + ("\n" if "\n" not in value else " ") + after if after else value)
    return next((c for c in full[:-1] if classify_answer(c)), full[-1]), ""


_FOLLOWING_LINES = 3  # an answer's own explanation is a line or two; a new section starts after a blank line


def _following_lines(region: str, end: int, limit: int) -> str:
    """The lines after an answer that ends at `end`, before `limit` (the next answer), up to a blank line, a
    heading, a chat tag or a fence (a new section), bounded."""
    out: list[str] = []
    for line in region[end:min(limit, end + 2 * _MAX_ANSWER_CHARS)].split("\n")[1:_FOLLOWING_LINES + 1]:
        line = line.strip()
        if not line or line.startswith(("#", "<|", "</", "<think", "```")):
            break
        out.append(line)
    return " ".join(out)[:_MAX_ANSWER_CHARS]


def _candidate_key(value: str) -> object:
    """Two candidates are one answer when their numbers are equal or their texts differ only by spacing, case and
    emphasis (parsing.answer_key); a value too long to read is compared as written (classify_answer refuses it)."""
    value = value.partition("\n")[0]
    if len(value) > _MAX_ANSWER_CHARS:
        return answer_key(value)
    number = parse_number(value)
    return number if number is not None else answer_key(clean_answer(value))



# --------------------------------------------------------------- comparison


def parse_gold(answer: object) -> str | None:
    """Gold answers may be GSM8K-style ('... #### 72'), numbers, or strings; None when empty."""
    if answer is None:
        return None
    text = str(answer)
    m = _GSM8K_GOLD.search(text)
    if m:
        text = m.group(1)
    text = text.strip()
    return text or None


def is_numeric_answer(answer: object) -> bool:
    """Whether this reward reads `answer` as a number: the one parser of gold answers (`parse_gold` +
    `parse_number`), so 72, "1,225 stamps", "$3.50", "18元", "26厘米", "10 cups", "1/2" and GSM8K's "... #### 72" are
    numbers, "seventy-two", "nan" and "1e400" are not (`data check` and the math family read answers with it)."""
    if isinstance(answer, bool):
        return False
    if isinstance(answer, (int, float)):
        return math.isfinite(answer)
    gold = parse_gold(answer)
    return gold is not None and parse_number(gold) is not None


@functools.lru_cache(maxsize=8192)
def _gold_form(gold: str) -> tuple[Fraction | None, str] | None:
    """(number, cleaned text) of a gold answer; None when it is not a parseable answer."""
    if len(gold) > _MAX_ANSWER_CHARS:
        return None
    number = parse_number(gold)
    cleaned = clean_answer(gold)
    if number is None and (not cleaned or symbolic_parse(cleaned) is None):
        return None
    return number, cleaned


def answers_match(predicted: str | None, gold: str) -> bool:
    """True when `predicted` (an extracted final answer) is equivalent to `gold` (see module docstring)."""
    return _compare(predicted, gold) == "correct"


def _compare(predicted: str | None, gold: str) -> str:
    form = _gold_form(gold)
    if form is None:
        return "gold_unparseable"
    if predicted is None:
        return "no_answer"
    problem = classify_answer(predicted)
    predicted = predicted.partition("\n")[0]  # the lines after the answer explain it; the value is on its line
    gold_number, gold_text = form
    pred_text = clean_answer(predicted)
    if problem == "several_answers" and gold_number is None:
        problem = ""  # a set or tuple gold answer ("1, 2") is compared as a whole
    if problem:
        return problem
    if pred_text.lower() == gold_text.lower():
        return "correct"
    pred_number = parse_number(predicted)
    if gold_number is not None and pred_number is not None:
        return "correct" if pred_number == gold_number else "wrong"
    if gold_number is not None and not _plain_math(pred_text):
        return "wrong"  # math-verify would read a part of it: "12 \\overline{13}", "12 \\to (13)" are not 12
    return "correct" if symbolic_equal(pred_text, gold_text) else "wrong"


# An expression compared with a number goes to math-verify only when math-verify reads all of it: digits,
# operators, brackets, single-letter variables and these commands. Anything else (\overline, \color, \tag,
# \to, "·", "⋯", words) math-verify may skip, keeping one number of several.
_MATH_COMMANDS = re.compile(r"\\(?:[dt]?frac|sqrt|cdot|times|div|pi|left|right)(?![a-zA-Z])")
_PLAIN_MATH = re.compile(r"(?:[\d\s.+\-*/^(){}\[\]=,]|(?<![a-zA-Z])[a-zA-Z](?![a-zA-Z]))*")


def _plain_math(text: str) -> bool:
    balanced = all(text.count(a) == text.count(b) for a, b in ("()", "{}", "[]"))
    return balanced and bool(_PLAIN_MATH.fullmatch(_MATH_COMMANDS.sub(" ", text)))


def check_math(completion: str, answer: object, markers: tuple[str, ...] = DEFAULT_MARKERS) -> MathVerdict:
    """The full verdict for one completion against one gold answer."""
    gold = parse_gold(answer)
    if gold is None or _gold_form(gold) is None:
        return MathVerdict(None, "gold_unparseable", None, gold)
    predicted, reason = _single_answer(completion, tuple(markers))
    if predicted is not None:
        reason = _compare(predicted, gold)
    reward = 1.0 if reason == "correct" else 0.0
    shown = None if predicted is None else predicted.partition("\n")[0][:_MAX_ANSWER_CHARS]
    return MathVerdict(reward, reason, shown, gold)


def score_math(completion: str, answer: object, markers: tuple[str, ...] = DEFAULT_MARKERS) -> float | None:
    return check_math(completion, answer, markers).reward


@describe(
    description="1.0 when the completion's single final answer (answer line or \\boxed{}, after any <think> block) "
    "is equivalent to the gold answer (numbers, fractions, units, LaTeX, symbolic via math-verify), else 0.0; "
    "refusals, hedges and several different answers score 0.0; null when the gold answer cannot be parsed.",
    columns=("answer",),
    params={"markers": "answer-line markers to look for, case-insensitive (default: Final answer:, 最终答案：, 最终答案:)"},
)
def get_math_correctness_reward(markers: list[str] | tuple[str, ...] = DEFAULT_MARKERS):
    r"""The `math_correctness` scorer: 1.0 for the gold answer, 0.0 for a wrong, hedged or refused one.

    Example:

    >>> from grpokit.rewards.math import get_math_correctness_reward
    >>> score = get_math_correctness_reward()
    >>> completions = ["18 - 3 = 15\nFinal answer: 15", "Final answer: 14", "Final answer: 15 or 16", "I don't know"]
    >>> score(completions, answer=["15"] * 4)
    [1.0, 0.0, 0.0, 0.0]
    >>> score(["Final answer: $1,225.00"], answer=["1225"])  # numbers are compared as numbers
    [1.0]
    >>> get_math_correctness_reward(markers=["Answer:"])(["Answer: 0.5"], answer=["1/2"])
    [1.0]
    """
    markers = answer_markers(markers)

    def score(completions: list[str], answer: list, **_columns) -> list[float | None]:
        return [score_math(c, a, markers) for c, a in zip(completions, answer)]

    def explain(completion: str, answer: object = None, **_row) -> dict:
        v = check_math(completion, answer, markers)
        return {"reward": v.reward, "reason": v.reason, "predicted": v.predicted, "gold": v.gold}

    score.explain = explain
    return score
