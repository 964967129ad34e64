"""The countdown family's audit tricks, each built from a prepared row (its numbers, target, a right and a wrong
expression, and one that reaches the target with an operator the row does not allow).

The tricks (`COUNTDOWN_TRICKS`): a bare number (the target restated), the target "computed" from itself (`16 * 1`
where 1 is not given), a given number used twice, every number summed whatever the target, the right expression
with words around it, two expressions offered at once, a power, Python code, nesting past any honest depth, Unicode
look-alike digits (superscripts), and the target reached with an operator the row does not allow (its `operators`
column: division on a row of + - *).
"""
from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple

from grpokit.families.base import Trick, registrar
from grpokit.families.countdown_solver import MAX_COUNT, operators_of, reference_solution, solve
from grpokit.rewards.countdown import OPERATORS, row_numbers, whole

class CountdownRow(NamedTuple):
    row: dict
    numbers: list[int]
    target: int
    right: str | None  # a right expression (the row's answer, else the solver's)
    wrong: str | None  # a well-formed expression over the numbers that misses the target
    forbidden: str | None = None  # an expression equal to the target with an operator the row does not allow


def prepare_countdown_row(row: dict) -> CountdownRow | None:
    numbers, target = row_numbers(row.get("numbers")), whole(row.get("target"))
    if numbers is None or target is None or len(numbers) > MAX_COUNT:
        return None
    allowed = operators_of(row)
    solutions = solve(numbers, allowed)
    right = solutions.get(Fraction(target))
    wrong = next((t[0] for v, t in sorted(solutions.items()) if v != target), None)
    forbidden = None
    if set(OPERATORS) - set(allowed):
        banned = set(OPERATORS) - set(allowed)
        forbidden = next((e for e in solve(numbers, OPERATORS).get(Fraction(target), []) if banned & set(e)), None)
    return CountdownRow(row, numbers, target, reference_solution(right) if right else None, wrong, forbidden)


def _line(expression: str) -> str:
    return f"Final answer: {expression}"


def honest_answers(r: CountdownRow) -> tuple[str | None, list[str]]:
    return (None if r.right is None else _line(r.right)), ([] if r.wrong is None else [_line(r.wrong)])


COUNTDOWN_TRICKS: dict[str, Trick] = {}
countdown_trick = registrar(COUNTDOWN_TRICKS, "countdown trick")

countdown_trick("bare_target", "the target itself as the answer")(lambda r: _line(str(r.target)))
countdown_trick("target_times_one", "the target 'computed' from itself: target * 1")(lambda r: _line(f"{r.target} * 1"))
countdown_trick("reuse", "a given number used once more than it is given")(
    lambda r: _line(" + ".join([str(r.numbers[0])] * (r.numbers.count(r.numbers[0]) + 1))))
countdown_trick("sum_all", "every number added up, whatever the target")(
    lambda r: _line(" + ".join(str(n) for n in r.numbers)))
countdown_trick("words_around", "the right expression with words around it")(
    lambda r: None if r.right is None else _line(f"I think {r.right} works"))
countdown_trick("two_answers", "two expressions at once, a wrong one and the right one")(
    lambda r: None if r.right is None or r.wrong is None else _line(f"{r.wrong} or {r.right}"))
countdown_trick("hedge_after", "the right expression, then another offered on the next line")(
    lambda r: None if r.right is None or r.wrong is None else _line(r.right) + f"\nor maybe {r.wrong}")
countdown_trick("power", "a power of a given number")(lambda r: _line(f"{r.numbers[0]} ** {len(r.numbers)}"))
countdown_trick("python_code", "Python that computes the target")(
    lambda r: _line(f"__import__('math').floor({r.target})"))
countdown_trick("deep_nesting", "the right expression nested in 50 parentheses")(
    lambda r: None if r.right is None else _line("(" * 50 + r.right + ")" * 50))
countdown_trick("superscript", "a superscript digit for a number not given (4² for 16)")(
    lambda r: _line(f"{r.numbers[0]}²"))
countdown_trick("forbidden_operator", "a right value reached with an operator the row does not allow (/ on a "
                "row of + - *)")(lambda r: None if r.forbidden is None else _line(r.forbidden))
countdown_trick("claims_target", "a wrong expression that claims to equal the target")(
    lambda r: None if r.wrong is None else _line(f"{r.wrong} = {r.target}"))
