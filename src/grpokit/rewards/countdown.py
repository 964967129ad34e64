"""The `countdown` reward: one arithmetic expression, built from the given numbers, that equals the target.

A countdown row gives a few small numbers and a target (`numbers`, `target`: grpokit.families.countdown makes them),
and may name the operators it allows (`operators`, e.g. "+-*": the generator writes it, and its prompt says it);
the answer line holds one expression, e.g. `Final answer: (7 - 3) * 4`. Many expressions are right: any that uses
given numbers, each at most as often as it is given, with the allowed operators, and equals the target. The allowed
operators are the row's `operators` where it has the column, else the reward's `operators` param (default all four):
an answer dividing on a row that allows + - * only is refused (`operator_not_allowed`), as the task SFT is taught.

    grpokit rewards score --reward countdown --input rows.jsonl     # rows with completion, numbers, target

The expression is read by the small parser below, never by `eval`: numbers are whole decimal numbers (any script's
decimal digits; not superscripts, fractions or numerals such as Ⅻ, which are refused), the operators are + - * /
(with their common Unicode forms × · ÷ −, and full-width ones), and parentheses. The value is computed exactly
(fractions). Refused, each with its reason (`check_countdown(...).reason`): no answer line or several different
ones, text after the answer, letters or other text in the expression, powers, a sign in front of a number, a number
not given or used more often than given, division by zero, a step whose result is not a whole number
(`integer_steps`, the classic game's rule, on by default), an expression longer than MAX_EXPRESSION_CHARS or nested
deeper than MAX_DEPTH, a value past MAX_MAGNITUDE, and a claimed result (`... = 17`) that is not the value. A
trailing `= N` is allowed when N is the value, judged by its value (`= 16` or `= 16.0`; models often write it); the
claimed number is not a used number. The answer line is read as parsing.answer_lines reads it: at a line's start,
emphasis around it dropped (`**Final answer:** (7 - 3) * 4`), whole (a value past MAX_EXPRESSION_CHARS is too_long);
the same expression written twice with other spacing is one answer.

Scores: 1.0 when the value is the target; `format_score` (default 0.1, TinyZero's format reward) for a well-formed
expression of given numbers that misses it; 0.0 otherwise. That partial score is the only partial credit: it pays
for the form, never for being close to the target (a distance reward pays a model for stopping near the answer).
Not covered: exponentiation, concatenating digits ("3" and "4" into 34), a chain of several equations.
"""
from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction

from grpokit.rewards.parsing import DEFAULT_MARKERS, answer_key, answer_lines, answer_markers, answer_region
from grpokit.rewards.registry import describe

MAX_EXPRESSION_CHARS = 200  # an expression over six numbers is ~40 characters; more is text, not an answer
MAX_DEPTH = 12  # parentheses nested deeper than any expression over a handful of numbers needs
MAX_MAGNITUDE = 10**12  # no product of a few given numbers comes near; bounds work on hostile rows with huge numbers
OPERATORS = "+-*/"
FORMAT_SCORE = 0.1  # TinyZero's countdown reward pays 0.1 for a well-formed answer that misses the target

# Operator spellings read as the ASCII one (a model trained on web text writes these); anything else is refused.
_ALIASES = {"×": "*", "·": "*", "⋅": "*", "∗": "*", "＊": "*", "÷": "/", "∕": "/", "／": "/",
            "−": "-", "–": "-", "－": "-", "＋": "+", "（": "(", "）": ")", "＝": "="}


@dataclass(frozen=True)
class CountdownVerdict:
    reward: float
    reason: str  # "" when right; else why not, e.g. "number_not_given: 9"
    expression: str | None = None  # the answer line's expression as read
    value: Fraction | None = None
    used: tuple[int, ...] = field(default_factory=tuple)


class Refused(ValueError):
    """Why an expression is not a usable answer: `reason` is the verdict's reason key, the message says more."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def apply(op: str, a: Fraction, b: Fraction, integer_steps: bool = True) -> Fraction:
    """One step of the game, as the reward and grpokit.families.countdown's solver both compute it."""
    if op == "+":
        out = a + b
    elif op == "-":
        out = a - b
    elif op == "*":
        out = a * b
    else:
        if b == 0:
            raise Refused("division_by_zero", f"{a} / 0")
        out = a / b
    if integer_steps and out.denominator != 1:
        raise Refused("not_whole", f"{a} {op} {b} = {out} is not a whole number")
    if abs(out) > MAX_MAGNITUDE:
        raise Refused("too_large", f"a step reaches {out}")
    return out


def _tokens(text: str) -> list[tuple[str, object]]:
    """("num", int) / ("op", c) / ("(", ) ... from the expression; refuses what the game has no use for."""
    out: list[tuple[str, object]] = []
    i, n = 0, len(text)
    while i < n:
        c = _ALIASES.get(text[i], text[i])
        if c.isspace():
            i += 1
            continue
        if unicodedata.category(c) == "Nd":  # a decimal digit of any script; "²", "½", "Ⅻ" are other categories
            j = i
            while j < n and unicodedata.category(text[j]) == "Nd":
                j += 1
            if j < n and text[j] in ".,":
                if j + 1 < n and unicodedata.category(text[j + 1]) == "Nd":
                    raise Refused("not_whole", f"{text[i:j + 2]}... is not a whole number")
            out.append(("num", int("".join(str(unicodedata.decimal(d)) for d in text[i:j]))))
            i = j
            continue
        if c == "*" and i + 1 < n and _ALIASES.get(text[i + 1], text[i + 1]) == "*" or c == "^":
            raise Refused("power", "powers are not allowed")
        if c in "+-*/()=":
            out.append((c, c))
            i += 1
            continue
        if unicodedata.category(c).startswith("L"):
            raise Refused("text", f"words in the expression ({text[i:i + 12]!r})")
        raise Refused("not_an_expression", f"{c!r} is not a number, an operator or a parenthesis")
    return out


class _Parser:
    """expr := term (("+"|"-") term)* ; term := factor (("*"|"/") factor)* ; factor := number | "(" expr ")".

    Written here rather than taken from a library (simpleeval, asteval): those evaluate a whole language (names,
    calls, powers, attribute access) that the game must refuse, and cannot report which numbers an expression used.
    """

    def __init__(self, tokens, operators: str, integer_steps: bool):
        self.t, self.i, self.ops, self.integer_steps = tokens, 0, operators, integer_steps
        self.used: list[int] = []
        self.steps: list[str] = []  # "7 - 3 = 4", each step as computed (worked_steps)
        self.depth = 0

    def peek(self) -> str | None:
        return self.t[self.i][0] if self.i < len(self.t) else None

    def take(self):
        tok = self.t[self.i]
        self.i += 1
        return tok

    def expr(self) -> Fraction:
        value = self.term()
        while self.peek() in ("+", "-"):
            value = self.step(self.take()[0], value, self.term())
        return value

    def term(self) -> Fraction:
        value = self.factor()
        while self.peek() in ("*", "/"):
            value = self.step(self.take()[0], value, self.factor())
        return value

    def step(self, op: str, a: Fraction, b: Fraction) -> Fraction:
        if op not in self.ops:
            raise Refused("operator_not_allowed", f"{op!r} is not one of {' '.join(self.ops)}")
        out = apply(op, a, b, self.integer_steps)
        self.steps.append(f"{a} {op} {b} = {out}")
        return out

    def factor(self) -> Fraction:
        kind = self.peek()
        if kind == "num":
            number = self.take()[1]
            self.used.append(number)
            return Fraction(number)
        if kind == "(":
            self.take()
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise Refused("too_deep", f"parentheses nested deeper than {MAX_DEPTH}")
            value = self.expr()
            if self.peek() != ")":
                raise Refused("not_an_expression", "a parenthesis is never closed")
            self.take()
            self.depth -= 1
            return value
        if kind in ("+", "-"):
            raise Refused("sign", "a sign in front of a number (use the given numbers as they are)")
        raise Refused("not_an_expression", "an operator without a number" if kind else "the expression ends early")


def evaluate_expression(expression: str, numbers, operators: str = OPERATORS,
                        integer_steps: bool = True) -> tuple[Fraction, tuple[int, ...]]:
    """(value, the numbers it used) of one expression over `numbers`; raises Refused with the reason.

    >>> evaluate_expression("(7 - 3) × 4", [3, 4, 7])
    (Fraction(16, 1), (7, 3, 4))
    >>> evaluate_expression("7 + 7", [3, 4, 7])
    Traceback (most recent call last):
    grpokit.rewards.countdown.Refused: number_reused: 7 is used 2 times, given 1
    """
    return _parse(expression, numbers, operators, integer_steps)[:2]


def worked_steps(expression: str, numbers, operators: str = OPERATORS, integer_steps: bool = True) -> list[str]:
    """Each step of the expression as it is computed: `(7 - 3) * 4` -> ["7 - 3 = 4", "4 * 4 = 16"] (what `grpokit
    sft` teaches before the answer line); raises Refused as `evaluate_expression` does."""
    return _parse(expression, numbers, operators, integer_steps)[2]


def _parse(expression: str, numbers, operators: str, integer_steps: bool):
    text = expression.strip()
    if len(text) > MAX_EXPRESSION_CHARS:
        raise Refused("too_long", f"{len(text)} characters, more than {MAX_EXPRESSION_CHARS}")
    text, eq, rest = text.replace("＝", "=").partition("=")
    tokens = _tokens(text)
    claimed = _claimed(rest) if eq else None  # "(7 - 3) * 4 = 16.0": the claim is judged by its value
    if not tokens:
        raise Refused("not_an_expression", "no expression")
    parser = _Parser(tokens, operators, integer_steps)
    value = parser.expr()
    if parser.i != len(tokens):
        raise Refused("not_an_expression", "something follows a complete expression")
    given, used = Counter(int(x) for x in numbers), Counter(parser.used)
    for number in used:  # a number not given at all first: it says more than a reuse
        if number not in given:
            raise Refused("number_not_given", f"{number} is not one of {sorted(given.elements())}")
    for number, times in used.items():
        if times > given[number]:
            raise Refused("number_reused", f"{number} is used {times} times, given {given[number]}")
    if claimed is not None and claimed != value:
        raise Refused("wrong_claim", f"claims {claimed}, the expression is {value}")
    return value, tuple(parser.used), parser.steps


_CLAIM = re.compile(r"[+-]?\d+(?:\.\d+)?")


def _claimed(rest: str) -> Fraction:
    """The result claimed after '=' (a number, whole or decimal: "16", "16.0"); it is not a used number."""
    claim = "".join(str(unicodedata.decimal(c)) if unicodedata.category(c) == "Nd" else _ALIASES.get(c, c)
                    for c in rest.strip().rstrip("."))
    if not _CLAIM.fullmatch(claim):
        raise Refused("not_an_expression", "after '=' only the result may follow")
    return Fraction(claim)


def _answer(text: str, markers: tuple[str, ...]) -> tuple[str | None, str]:
    """(the answer line's expression, "") or (None, why there is none)."""
    region = answer_region(text)
    if region is None:
        return None, "unclosed_think"
    lines = answer_lines(region, markers)
    if not lines:
        return None, "no_answer"
    if len({answer_key(v) for _, _, v in lines}) > 1:  # the same answer twice, spaced otherwise, is one answer
        return None, "several_answers"
    if region[lines[-1][1]:].strip():
        return None, "text_after"
    return lines[-1][2].rstrip("."), ""


def check_countdown(completion: str, numbers, target, markers: tuple[str, ...] = DEFAULT_MARKERS,
                    operators: str = OPERATORS, integer_steps: bool = True,
                    format_score: float = FORMAT_SCORE) -> CountdownVerdict:
    expression, why = _answer(completion, markers)
    if expression is None:
        return CountdownVerdict(0.0, why)
    try:
        value, used = evaluate_expression(expression, numbers, operators, integer_steps)
    except Refused as e:
        return CountdownVerdict(0.0, str(e), expression)
    except RecursionError:  # bounded by MAX_EXPRESSION_CHARS and MAX_DEPTH; kept so no input can raise through
        return CountdownVerdict(0.0, "too_deep", expression)
    if value != Fraction(int(target)):
        return CountdownVerdict(format_score, f"misses_target: {value} is not {target}", expression, value, used)
    return CountdownVerdict(1.0, "", expression, value, used)


def row_operators(value, default: str = OPERATORS) -> str | None:
    """A row's `operators` column: the row's own ("+-*"), `default` where the row has none (None, "", a missing
    column), None where it is not a string of some of + - * / (the row does not apply: `data check` says why)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return default
    if not isinstance(value, str) or set(value.strip()) - set(OPERATORS):
        return None
    return "".join(dict.fromkeys(value.strip()))


_WHOLE = re.compile(r"-?[0-9]+")


def whole(x) -> int | None:
    """A row's number as an int: 7, 7.0, "7"; None for anything else ("7.5", True, "seven")."""
    if isinstance(x, bool):
        return None
    if isinstance(x, int):
        return x
    if isinstance(x, float):
        return int(x) if x.is_integer() else None
    if isinstance(x, str) and _WHOLE.fullmatch(x.strip()):  # one sign at most: "--5" is not a number
        return int(x.strip())
    return None


def row_numbers(numbers) -> list[int] | None:
    """A row's `numbers` as whole numbers (a list, or a string "3 4 7" / "[3, 4, 7]" from a CSV), or None when
    they are not (the row does not apply)."""
    if isinstance(numbers, str):
        numbers = numbers.strip().strip("[]").replace(",", " ").split()
    if not isinstance(numbers, (list, tuple)) or not numbers:
        return None
    out = [whole(x) for x in numbers]
    return None if any(x is None for x in out) else out


@describe(
    description="1.0 when the single final answer is an expression over the row's `numbers` (each at most as often "
    "as given; + - * / and parentheses) equal to its `target`; format_score for a well-formed expression that misses "
    "it; 0.0 for numbers not given or reused, powers, words, division by zero, a non-whole step (integer_steps), "
    "several answers, an operator the row's `operators` column (else the operators param) does not allow; null when "
    "the row's numbers or target are not whole numbers or its operators not some of + - * /.",
    columns=("numbers", "target"),
    params={"markers": "answer-line markers to look for, case-insensitive (default: Final answer:, 最终答案：, 最终答案:)",
            "operators": "the operators allowed on rows without an `operators` column, a string out of '+-*/' "
                         "(default all four); a row's own column wins",
            "integer_steps": "every step's result must be a whole number, the classic game's rule (default true)",
            "format_score": "the score of a well-formed expression over given numbers that misses the target "
                            "(default 0.1, TinyZero's format reward; 0 turns it off)"},
)
def get_countdown_reward(markers: list[str] | tuple[str, ...] = DEFAULT_MARKERS, operators: str = OPERATORS,
                         integer_steps: bool = True, format_score: float = FORMAT_SCORE):
    r"""The `countdown` scorer.

    Example:

    >>> from grpokit.rewards.countdown import get_countdown_reward
    >>> score = get_countdown_reward()
    >>> rows = {"numbers": [[3, 4, 7]] * 4, "target": [16] * 4}
    >>> score(["7 - 3 = 4\n4 * 4 = 16\nFinal answer: (7 - 3) * 4", "Final answer: 4 * (7 - 3)",
    ...        "Final answer: 3 + 4 + 7", "Final answer: 16"], **rows)
    [1.0, 1.0, 0.1, 0.0]
    """
    markers = answer_markers(markers)
    if not isinstance(operators, str) or not operators or set(operators) - set(OPERATORS):
        raise ValueError(f"operators must be a string of some of {OPERATORS!r}, got {operators!r}")
    default_operators = operators  # the rows' own `operators` column wins (score's and explain's `operators`)
    if not 0.0 <= float(format_score) < 1.0:
        raise ValueError(f"format_score must be in [0, 1), got {format_score!r}")

    def verdict(completion: str, numbers, target, allowed=None) -> CountdownVerdict | None:
        given, goal, ops = row_numbers(numbers), whole(target), row_operators(allowed, default_operators)
        if given is None or goal is None or ops is None:
            return None
        return check_countdown(completion, given, goal, markers, ops, bool(integer_steps), float(format_score))

    def score(completions: list[str], numbers: list, target: list, operators: list | None = None,
              **_columns) -> list[float | None]:
        allowed = operators if operators is not None else [None] * len(completions)
        return [None if v is None else v.reward
                for v in (verdict(c, n, t, o) for c, n, t, o in zip(completions, numbers, target, allowed))]

    def explain(completion: str, numbers=None, target=None, operators=None, **_row) -> dict:
        v = verdict(completion, numbers, target, operators)
        if v is None:
            return {"reward": None, "reason": "row_not_applicable: numbers and target must be whole numbers and "
                    "operators some of + - * /"}
        return {"reward": v.reward, "reason": v.reason, "expression": v.expression,
                "value": None if v.value is None else str(v.value), "used": list(v.used)}

    score.explain = explain
    return score
