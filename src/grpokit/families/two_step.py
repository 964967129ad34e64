"""Two-step arithmetic (`a op1 b op2 c`, + and -) in several scenarios, split by composition: what the composition
demo trains on and holds out.

    grpokit data generate two-step train.jsonl --rows 1000 --seed 0                         # seen compositions
    grpokit data generate two-step eval.jsonl --rows 500 --seed 1 --compositions unseen      # held-out ones
    grpokit data generate two-step worked.jsonl --rows 1000 --seed 0 --operands              # train.jsonl + operands
    grpokit demo --task composition

A problem is a scenario (apples, books, bus passengers, coins, a bare sum, ...: SCENARIOS) told as a start amount
and two clauses, each clause adding or taking away; its `order` is the two operations in the order they come
("+-": first an addition, then a subtraction). A composition is a (scenario, order) pair: 8 scenarios x 4 orders.
UNSEEN holds one order out of each scenario, each order out of two scenarios, so training rows (the `seen`
compositions) show every scenario, every order and every clause in each position, and only the held-out rows'
combinations are new (the "From Atomic to Composite" paper's test: does a model compose skills it has into
combinations it never saw?). The atomic skills are the one-step sums of the arithmetic task (grpokit.families.math).

Rows are `{question, answer, scenario, order}`: final answers only, as the 0.6B-Base article's data (a user with
answer-only rows). `--operands` also writes `operands` ([a, b, c]), from which the math family's `reference` writes
the worked solution `grpokit sft` teaches (`worked_lines`: `a op1 b = x`, `x op2 c = y`); the same seed gives the
same rows with or without it. Every intermediate and final amount is a whole number >= 0 (they are counts).

The `seen` variant (evaluation only) asks each held-out row's numbers and operations in a scenario where that order
is a training composition: the same sums and answers, only the composition familiar, so seen against unseen is
measured on the same numbers. Not covered: more than two steps, multiplication, phrasings outside SCENARIOS.
"""
from __future__ import annotations

import random
import re
from functools import cache, partial
from typing import NamedTuple

from grpokit.families.base import Generator, Option, Variant


class Scenario(NamedTuple):
    start: str  # the start amount, {a}
    plus: tuple[str, str]  # the adding clause as the first step, then as the second ({n})
    minus: tuple[str, str]  # the taking-away clause, the same way
    ask: str  # the question; "" where the second clause ends it


SCENARIOS: dict[str, Scenario] = {
    "apples": Scenario("Tom has {a} apples.", ("He buys {n} more.", "Then he buys {n} more."),
                       ("He eats {n} of them.", "Then he eats {n} of them."), "How many apples does he have now?"),
    "books": Scenario("A shelf holds {a} books.", ("{n} books are put on it.", "Then {n} more books are put on it."),
                      ("{n} books are taken away.", "Then {n} books are taken away."),
                      "How many books are on the shelf now?"),
    "bus": Scenario("A bus has {a} passengers.", ("At the first stop, {n} get on.", "At the next stop, {n} get on."),
                    ("At the first stop, {n} get off.", "At the next stop, {n} get off."),
                    "How many passengers are on the bus now?"),
    "coins": Scenario("Ana has {a} coins.", ("She finds {n} more coins.", "Later she finds {n} more coins."),
                      ("She spends {n} coins.", "Later she spends {n} coins."), "How many coins does Ana have now?"),
    "sum": Scenario("What is {a}", ("+ {n}", "+ {n}?"), ("- {n}", "- {n}?"), ""),
    "temperature": Scenario("In the morning it was {a} degrees.",
                            ("By noon it had risen {n} degrees.", "By evening it had risen another {n} degrees."),
                            ("By noon it had fallen {n} degrees.", "By evening it had fallen another {n} degrees."),
                            "How many degrees is it in the evening?"),
    "savings": Scenario("Lee has {a} dollars saved.", ("He earns {n} dollars.", "Then he earns {n} dollars more."),
                        ("He spends {n} dollars.", "Then he spends {n} dollars more."),
                        "How many dollars does Lee have saved now?"),
    "steps": Scenario("Start with {a}.", ("Add {n}.", "Then add {n}."), ("Subtract {n}.", "Then subtract {n}."),
                      "What number do you get?"),
}
ORDERS = ("++", "+-", "-+", "--")
# The held-out composition of each scenario: ORDERS in turn, so each order is held out of two scenarios and seen in
# six, and every clause of a scenario is seen in both positions (only its held-out order's pairing is new).
UNSEEN: dict[str, str] = {name: ORDERS[i % len(ORDERS)] for i, name in enumerate(SCENARIOS)}
COMPOSITIONS = ("seen", "unseen")  # --compositions: the training side, the held-out side
LOW = 2  # the smallest operand, as the one-step task's
_TRIES = 1000  # draws in a row that find no new question before generate gives up (an --exclude that took most)


def is_seen(scenario: str, order: str) -> bool:
    return UNSEEN.get(scenario) != order


def compositions_of(which: str) -> list[tuple[str, str]]:
    """The (scenario, order) pairs on one side of the split (`seen`: training, `unseen`: held out)."""
    return [(s, o) for s in SCENARIOS for o in ORDERS if is_seen(s, o) == (which == "seen")]


def _step(x: int, op: str, y: int) -> int:
    return x + y if op == "+" else x - y


def question_of(scenario: str, order: str, a: int, b: int, c: int) -> str:
    s = SCENARIOS[scenario]
    first = (s.plus if order[0] == "+" else s.minus)[0].format(n=b)
    second = (s.plus if order[1] == "+" else s.minus)[1].format(n=c)
    return " ".join(p for p in (s.start.format(a=a), first, second, s.ask) if p)


def make_row(scenario: str, order: str, a: int, b: int, c: int, operands: bool = False) -> dict:
    answer = _step(_step(a, order[0], b), order[1], c)
    row = {"question": question_of(scenario, order, a, b, c), "answer": str(answer), "scenario": scenario,
           "order": order}
    return {**row, "operands": [a, b, c]} if operands else row


def _draw(rng: random.Random, order: str, high: int) -> tuple[int, int, int]:
    """Operands in [LOW, high] whose intermediate and final amounts are >= 0 (counts)."""
    while True:
        a, b, c = (rng.randint(LOW, high) for _ in range(3))
        x = _step(a, order[0], b)
        if x >= 0 and _step(x, order[1], c) >= 0:
            return a, b, c


@cache
def _operand_triples(order: str, high: int) -> int:
    """How many (a, b, c) in [LOW, high] `_draw` accepts for `order` (every amount >= 0): a loop over (a, b), c
    counted (at most 10^6 pairs, once per order and range)."""
    n, total = high - LOW + 1, 0
    for a in range(LOW, high + 1):
        for b in range(LOW, high + 1):
            x = _step(a, order[0], b)
            if x >= 0:
                total += n if order[1] == "+" else max(0, min(x, high) - LOW + 1)
    return total


def most_rows(compositions: str, high: int) -> int:
    """Distinct problems `generate` draws at most on one side of the split: half of those that exist (a question's
    words and numbers are its composition and operands alone), so drawing the last ones stays quick, as the one-step
    task's MOST_ROWS."""
    return sum(_operand_triples(order, high) for _, order in compositions_of(compositions)) // 2


def generate(rows: int, seed: int = 0, exclude: set[str] | None = None, *, high: int, compositions: str = "seen",
             operands: bool = False) -> list[dict]:
    """`rows` distinct problems of the `compositions` side (module docstring), operands in [LOW, high]; questions in
    `exclude` are never produced. `high` has no default here: the math family passes the one-step task's."""
    if compositions not in COMPOSITIONS:
        raise ValueError(f"--compositions must be one of {', '.join(COMPOSITIONS)}, got {compositions!r}")
    if not 2 * LOW <= high <= 1000:  # "--" takes two operands away from a third: it needs a >= b + c
        raise ValueError(f"the largest operand must be {2 * LOW} to 1000, got {high}")
    pairs = compositions_of(compositions)
    rng, seen, out = random.Random(seed), set(exclude or ()), []
    most = most_rows(compositions, high)
    if rows + len(seen) > most:
        raise ValueError(f"at most {most:,} distinct {compositions} problems are drawn; asked for {rows:,}"
                         + (f" besides the {len(seen):,} excluded" if seen else ""))
    misses = 0
    while len(out) < rows:
        scenario, order = rng.choice(pairs)
        row = make_row(scenario, order, *_draw(rng, order, high), operands=bool(operands))
        if row["question"] in seen:
            misses += 1
            if misses > _TRIES:
                raise ValueError(f"no new problem found in {_TRIES} draws after {len(out)} rows: ask for fewer rows")
            continue
        misses = 0
        seen.add(row["question"])
        out.append(row)
    return out


def generator(high: int) -> Generator:
    """`grpokit data generate two-step`, its operands up to `high` (the math family passes its one-step task's, so the
    atomic skills and their compositions share one range)."""
    return Generator(partial(generate, high=high), "two-step additions and subtractions in word problems, split by "
                     "composition (scenario x order of the operations)", (
                         Option("compositions", "compositions", str, "two-step: seen (the training side, default) or "
                                "unseen (held-out compositions)"),
                         Option("operands", "operands", bool, "two-step: also write each row's operands, from which "
                                "`grpokit sft` writes a worked solution (default: final answers only)")),
                     most=most_rows("seen", high))  # the larger side; `unseen` is bounded by generate itself


# ---------------------------------------------------------------- reading rows back
_NUMBER = "(\\d+)"


def _form(scenario: str, order: str) -> re.Pattern:
    marked = question_of(scenario, order, -1, -2, -3)  # placeholders no real question holds
    pattern = re.escape(marked)
    for n in ("-1", "-2", "-3"):
        pattern = pattern.replace(re.escape(n), _NUMBER, 1)
    return re.compile(pattern + "$")


_FORMS = {(s, o): _form(s, o) for s in SCENARIOS for o in ORDERS}


def operands_of(row: dict) -> list[int] | None:
    """[a, b, c] of a two-step row: its `operands` column, else read from its question (its scenario and order say
    the form); None for a row that is not an unedited two-step problem."""
    scenario, order = row.get("scenario"), row.get("order")
    form = _FORMS.get((scenario, order)) if isinstance(scenario, str) and isinstance(order, str) else None
    m = form.match(str(row.get("question", "")).strip()) if form is not None else None
    if m is None:
        return None
    found = [int(g) for g in m.groups()]
    given = row.get("operands")
    return found if given is None or list(given) == found else None


def is_two_step(row: dict) -> bool:
    """An unedited two-step row: its question is its scenario and order's, and its answer is the sum's."""
    ops = operands_of(row)
    return ops is not None and str(row.get("answer", "")).strip() == make_row(row["scenario"], row["order"], *ops)["answer"]


def with_operands(rows: list[dict]) -> list[dict]:
    """The same rows with `operands` written (what `--operands` writes): the worked-SFT arm's rows from answer-only
    ones; a row that is not an unedited two-step problem raises ValueError with its number."""
    out = []
    for i, r in enumerate(rows):
        if not is_two_step(r):
            raise ValueError(f"row {i + 1} is not an unedited two-step problem (its question, scenario, order and "
                             "answer must be what `grpokit data generate two-step` wrote)")
        out.append({**r, "operands": operands_of(r)})
    return out


def worked_lines(row: dict) -> list[str] | None:
    """`a op1 b = x`, `x op2 c = y` for a row with `operands` (what `--operands` writes); None for any other row."""
    ops, order = row.get("operands"), row.get("order")
    if not isinstance(order, str) or order not in ORDERS or not isinstance(ops, (list, tuple)) or len(ops) != 3:
        return None
    try:
        a, b, c = (int(v) for v in ops)
    except (TypeError, ValueError):
        return None
    x = _step(a, order[0], b)
    return [f"{a} {order[0]} {b} = {x}", f"{x} {order[1]} {c} = {_step(x, order[1], c)}"]


# ---------------------------------------------------------------- the `seen` variant
def is_unseen(row: dict) -> bool:
    """A held-out row: an unedited two-step problem of an unseen composition."""
    return is_two_step(row) and not is_seen(row["scenario"], row["order"])


def seen_rows(rows: list[dict], seed: int = 0, exclude: set[str] | None = None) -> list[dict]:
    """Each unseen-composition row's numbers and operations asked in a scenario where its order is a training
    composition (seeded choice): the same answer; a question in `exclude` (a training question) is asked in the next
    such scenario instead."""
    rng, exclude, out = random.Random(seed), exclude or set(), []
    for r in rows:
        ops, order = operands_of(r), r["order"]
        choices = [s for s in SCENARIOS if is_seen(s, order)]
        rng.shuffle(choices)
        new = next((row for row in (make_row(s, order, *ops) for s in choices) if row["question"] not in exclude), None)
        if new is None:
            raise ValueError(f"every seen scenario of {r['question']!r} is a training question")
        out.append({**r, **new, **({"operands": ops} if "operands" in r else {})})
    return out


VARIANT = Variant("seen", "each held-out row's numbers and operations asked in a composition the training rows use "
                  "(another scenario with the same order of operations): the same sums and answers", is_unseen,
                  seen_rows, "two-step rows of a held-out composition (scenario/order matching the question)",
                  "seen compositions (same numbers)")
