"""Countdown's solver: every expression over a problem's numbers, by value, and the one solution SFT teaches.

    solve([3, 4, 7], "+-*")[Fraction(16)]   # ['(7 - 3) * 4', ...]: every right expression, each written once
    reference_solution(["4 * (7 - 3)", "7 * 4 - 3 * 4"])   # the fewest numbers, then the shortest

grpokit.families.countdown draws rows with it (a row is kept only if the solver proves it solvable) and the audit
reads its right and wrong answers; the verifier is grpokit.rewards.countdown, whose arithmetic (`apply`) it shares
so a solution it writes is one the reward accepts. Exhaustive: 5 numbers take a fraction of a second a problem (docs/
benchmarks.md), 6 numbers tens of seconds, which is why the generator caps --numbers (families.countdown.MAX_COUNT)."""
from __future__ import annotations

import itertools
from fractions import Fraction
from typing import NamedTuple

from grpokit.rewards.countdown import OPERATORS, Refused, apply, row_operators


class Expr(NamedTuple):
    value: Fraction
    text: str
    precedence: int  # 3 a number, 2 a product or quotient, 1 a sum or difference
    numbers: int  # how many given numbers it uses


MAX_COUNT = 5  # the solver enumerates every expression: 5 numbers take a fraction of a second a row, 6 tens of seconds
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
    once), each written once up to commuting + and * (`a + b`, never also `b + a`).

    By subsets of the numbers, smallest first: a subset's expressions are its two parts' combined, over each split
    once, so every expression tree is built once (merging pairs depth-first builds a tree once per order of its
    merges: 3x the time at 5 numbers, benchmarks/countdown_solver.py)."""
    leaves = [Expr(Fraction(n), str(n), 3, 1) for n in numbers]
    exprs: dict[int, list[Expr]] = {1 << i: [e] for i, e in enumerate(leaves)}  # a subset as a bit mask
    found: dict[Fraction, set[str]] = {}
    for mask in range(1, 1 << len(leaves)):
        if mask & (mask - 1) == 0:  # one number: a leaf
            continue
        made: dict[str, Expr] = {}
        lowest = mask & -mask
        part = (mask - 1) & mask
        while part:  # each split {part, rest} once: the part holding the lowest number
            if part & lowest:
                for a, b in itertools.product(exprs[part], exprs[mask ^ part]):
                    for op in operators:
                        for x, y in [(a, b)] if op in "+*" else [(a, b), (b, a)]:
                            if op in "+*" and x.text > y.text:
                                x, y = y, x
                            e = _combine(x, op, y, integer_steps)
                            if e is not None and e.text not in made:
                                made[e.text] = e
            part = (part - 1) & mask
        exprs[mask] = list(made.values())
        for e in exprs[mask]:
            found.setdefault(e.value, set()).add(e.text)
    return {v: sorted(texts, key=lambda t: (len(t), t)) for v, texts in found.items()}


def reference_solution(solutions: list[str]) -> str:
    """The one solution SFT teaches: the fewest numbers, then the shortest, then the first in order."""
    return min(solutions, key=lambda t: (sum(c.isdigit() and (i == 0 or not t[i - 1].isdigit())
                                             for i, c in enumerate(t)), len(t), t))


def operators_of(row: dict) -> str:
    """The operators a row allows, as the countdown reward reads them (all four where the row names none; a row
    naming others is refused by the family's row check before anything solves it)."""
    return row_operators(row.get("operators")) or OPERATORS
