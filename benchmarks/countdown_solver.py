"""The countdown solver's time: by subsets (grpokit's) against depth-first pair merging (the solver before
2026-12-06), and the harder evaluation copy it builds for every countdown evaluation.

    python benchmarks/countdown_solver.py                   # 20 problems of 5 numbers, 50 held-out rows made harder
    python benchmarks/countdown_solver.py --problems 40 --rows 500

Prints seconds per problem of each solver on the same random 5-number problems (drawn in the generator's ranges,
seeded) and whether their answers are identical (every value, every expression), then the seconds per row of
`harder_rows` (one more number: a 5-number solve per try) on the first `--rows` rows of the builtin held-out set,
and the 500 rows' minutes at that rate (what each evaluation of a countdown model spends before its first token).
"""
from __future__ import annotations

import argparse
import itertools
import random
import sys
import time
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))  # this checkout's grpokit


def depth_first(numbers, operators, integer_steps: bool = True) -> dict:
    """The former solver, kept as the baseline: merge any two items of the forest, recurse, record every merge."""
    from grpokit.families.countdown_solver import Expr, _combine

    found: dict = {}

    def search(items):
        for i, j in itertools.combinations(range(len(items)), 2):
            rest = [x for k, x in enumerate(items) if k not in (i, j)]
            for op in operators:
                for x, y in [(items[i], items[j])] if op in "+*" else [(items[i], items[j]), (items[j], items[i])]:
                    if op in "+*" and x.text > y.text:
                        x, y = y, x
                    e = _combine(x, op, y, integer_steps)
                    if e is None:
                        continue
                    found.setdefault(e.value, set()).add(e.text)
                    if rest:
                        search(rest + [e])

    search([Expr(Fraction(n), str(n), 3, 1) for n in numbers])
    return {v: sorted(t, key=lambda t: (len(t), t)) for v, t in found.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--problems", type=int, default=20, help="random 5-number problems each solver solves")
    p.add_argument("--rows", type=int, default=50, help="held-out rows made harder (builtin:countdown/eval.jsonl)")
    args = p.parse_args()
    from grpokit.data.io import load_rows
    from grpokit.families.countdown import DEFAULTS, harder_rows
    from grpokit.families.countdown_solver import solve

    rng, operators = random.Random(0), DEFAULTS["operators"]
    problems = [[rng.randint(DEFAULTS["low"], DEFAULTS["high"]) for _ in range(5)] for _ in range(args.problems)]
    seconds, answers = {}, {}
    for name, fn in (("by subsets", solve), ("depth-first", depth_first)):
        t0 = time.perf_counter()
        answers[name] = [fn(numbers, operators) for numbers in problems]
        seconds[name] = (time.perf_counter() - t0) / len(problems)
        print(f"{name:12s} {seconds[name]:.3f} s/problem ({len(problems)} problems of 5 numbers, {operators})")
    print(f"depth-first / by subsets: {seconds['depth-first'] / seconds['by subsets']:.2f}x; identical answers: "
          f"{answers['by subsets'] == answers['depth-first']}")
    rows = load_rows("builtin:countdown/eval.jsonl")[0][:args.rows]
    t0 = time.perf_counter()
    harder_rows(rows)
    per_row = (time.perf_counter() - t0) / len(rows)
    print(f"harder_rows: {per_row:.3f} s/row on {len(rows)} held-out rows -> {500 * per_row / 60:.1f} min for 500")


if __name__ == "__main__":
    main()
