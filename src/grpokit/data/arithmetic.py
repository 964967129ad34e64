"""A generated arithmetic task: small additions and subtractions in English.

    grpokit data generate arithmetic train.jsonl --rows 500 --seed 1
    grpokit data perturb eval.jsonl eval-perturbed.jsonl --seed 1

Rows are `{question, answer, a, b, op, kind}`. The operands are kept in the
row so that `perturb_row` can redraw the numbers of a problem and recompute
its answer (a memorisation check for evaluation). Problems are phrased as
bare sums ("What is 17 + 25?") or short word problems, so a model has to
read the question rather than pattern-match one layout. Small numbers keep
the task learnable by a 135M model in minutes on a CPU.
"""
from __future__ import annotations

import random

# (question template, operator); {a} and {b} are the operands.
PHRASINGS: tuple[tuple[str, str], ...] = (
    ("What is {a} + {b}?", "+"),
    ("What is {a} - {b}?", "-"),
    ("Compute {a} plus {b}.", "+"),
    ("Compute {a} minus {b}.", "-"),
    ("Tom has {a} apples and buys {b} more. How many apples does he have now?", "+"),
    ("A shelf holds {a} books. {b} books are taken away. How many books are left?", "-"),
    ("Mia walked {a} km on Monday and {b} km on Tuesday. How many km did she walk in total?", "+"),
    ("A bus has {a} passengers. At the stop, {b} get off. How many passengers remain?", "-"),
)
_PERTURB_TRIES = 100  # a phrasing has ~1200 operand pairs; 100 misses in a row means train covers nearly all
MAX_OPERAND = 50  # two-digit sums stay within what a 135M model can learn in a few dozen steps


def _draw(rng: random.Random, op: str) -> tuple[int, int]:
    a, b = rng.randint(2, MAX_OPERAND), rng.randint(2, MAX_OPERAND)
    if op == "-" and b > a:  # keep answers non-negative: they are counts
        a, b = b, a
    return a, b


def make_row(kind: int, a: int, b: int) -> dict:
    template, op = PHRASINGS[kind]
    answer = a + b if op == "+" else a - b
    return {"question": template.format(a=a, b=b), "answer": str(answer), "a": a, "b": b, "op": op, "kind": kind}


def generate(rows: int, seed: int = 0, exclude: set[str] | None = None) -> list[dict]:
    """`rows` distinct problems; questions in `exclude` are never produced."""
    rng = random.Random(seed)
    seen = set(exclude or ())
    out = []
    max_distinct = len(PHRASINGS) * (MAX_OPERAND - 1) ** 2 // 2
    if rows + len(seen) > max_distinct:
        raise ValueError(f"at most about {max_distinct} distinct problems exist; asked for {rows}")
    while len(out) < rows:
        kind = rng.randrange(len(PHRASINGS))
        a, b = _draw(rng, PHRASINGS[kind][1])
        row = make_row(kind, a, b)
        if row["question"] not in seen:
            seen.add(row["question"])
            out.append(row)
    return out


def perturb_row(row: dict, rng: random.Random) -> dict:
    """The same problem with new numbers and the recomputed answer."""
    kind = int(row["kind"])
    while True:
        a, b = _draw(rng, PHRASINGS[kind][1])
        if (a, b) != (row.get("a"), row.get("b")):
            return make_row(kind, a, b)


def is_generated(row: dict) -> bool:
    """True for an unedited row of this task (its question is exactly what its kind/a/b produce)."""
    try:
        kind, a, b = int(row["kind"]), int(row["a"]), int(row["b"])
    except (KeyError, TypeError, ValueError):
        return False
    return 0 <= kind < len(PHRASINGS) and make_row(kind, a, b)["question"] == row.get("question")


def perturb_rows(rows: list[dict], seed: int = 0, exclude: set[str] | None = None) -> list[dict]:
    """A perturbed copy of generated rows (seeded); other columns of a row are kept.

    Questions in `exclude` (the training set) are redrawn: a perturbed problem that happens to be a
    training problem would reward exactly the memory the copy is meant to catch.
    """
    bad = [i for i, r in enumerate(rows) if not is_generated(r)]
    if bad:
        raise ValueError(f"{len(bad)} row(s) are not generated arithmetic rows (first: row {bad[0] + 1}); "
                         "only rows with kind/a/b whose question matches them can be perturbed")
    rng, exclude = random.Random(seed), exclude or set()
    out = []
    for r in rows:
        for _ in range(_PERTURB_TRIES):
            new = perturb_row(r, rng)
            if new["question"] not in exclude:
                break
        out.append({**r, **new})
    return out
