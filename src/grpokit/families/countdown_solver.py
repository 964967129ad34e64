"""Countdown's solver: every expression over a problem's numbers, by value, and the one solution SFT teaches.

    solve([3, 4, 7], "+-*")[Fraction(16)]   # ['(7 - 3) * 4', ...]: every right expression, each written once
    reference_solution(["4 * (7 - 3)", "7 * 4 - 3 * 4"])   # the fewest numbers, then the shortest

grpokit.families.countdown draws rows with it (a row is kept only if the solver proves it solvable) and the audit
reads its right and wrong answers; the verifier is grpokit.rewards.countdown, whose arithmetic (`apply`) it shares
so a solution it writes is one the reward accepts. Exhaustive: 5 numbers take about half a second a problem, which
is why the generator caps --numbers (families.countdown.MAX_COUNT).
"""
from __future__ import annotations

import itertools
from fractions import Fraction
from typing import NamedTuple

from grpokit.rewards.countdown import OPERATORS, Refused, apply


class Expr(NamedTuple):
    value: Fraction
    text: str
    precedence: int  # 3 a number, 2 a product or quotient, 1 a sum or difference
    numbers: int  # how many given numbers it uses


_PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2}


def _combine(a: Expr, op: str, b: Expr, integer_steps: bool) -> Expr | None:
    try:
        value = apply(op, a.value, b.value, integer_steps)
    except Refused:
        return None
    p = _PRECEDENCE[op]
    left = a.text if a.precedence >= p else f"({a.text})"
    right = b.text if b.precedence > p or (b.precedence == p and op in "+*") else f"({b.text})"
    return Expr(value, f"{left} {op} {right}", p, a.numbers + b.numbers)


def solve(numbers, operators: str = OPERATORS, integer_steps: bool = True) -> dict[Fraction, list[str]]:
    """{value: [expressions reaching it]} over every expression that uses at least two of `numbers` (each at most
    once), each written once up to commuting + and * (`a + b`, never also `b + a`)."""
    found: dict[Fraction, set[str]] = {}

    def search(items: list[Expr]) -> None:
        for i, j in itertools.combinations(range(len(items)), 2):
            rest = [x for k, x in enumerate(items) if k not in (i, j)]
            a, b = items[i], items[j]
            for op in operators:
                pairs = [(a, b)] if op in "+*" else [(a, b), (b, a)]
                for x, y in pairs:
                    if op in "+*" and x.text > y.text:
                        x, y = y, x
                    e = _combine(x, op, y, integer_steps)
                    if e is None:
                        continue
                    found.setdefault(e.value, set()).add(e.text)
                    if rest:
                        search(rest + [e])

    search([Expr(Fraction(n), str(n), 3, 1) for n in numbers])
    return {v: sorted(texts, key=lambda t: (len(t), t)) for v, texts in found.items()}


def reference_solution(solutions: list[str]) -> str:
    """The one solution SFT teaches: the fewest numbers, then the shortest, then the first in order."""
    return min(solutions, key=lambda t: (sum(c.isdigit() and (i == 0 or not t[i - 1].isdigit())
                                             for i, c in enumerate(t)), len(t), t))
