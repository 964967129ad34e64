"""The countdown family: a few small numbers and a target; the answer is one expression that reaches it.

    grpokit data generate countdown train.jsonl --rows 2000 --seed 0          # 4 numbers 1-10, + - *, targets 2-30
    grpokit data generate countdown hard.jsonl --numbers 5 --high 20 --operators "+-*/" --max-needed 4
    grpokit demo --task sft-vs-grpo-countdown                                # SFT against GRPO on it

Many expressions are right (`numbers` 3, 4, 7, `target` 16: `(7 - 3) * 4`, `4 * (7 - 3)`), which is where RL has
something of its own to add over imitating one worked solution (TinyZero and the Countdown model card, docs/sources.md
"Sources"). The `countdown` reward (grpokit.rewards.countdown) judges an
answer by the row's numbers and target alone; the row's `answer` is one right expression, the solver's, which
`grpokit sft` teaches as steps then the answer line (`reference`).

Rows: `{question, answer, numbers, target, kind, solutions, operators}`. The generator draws `count` numbers in
[low, high] and a target among the whole numbers in [target_low, target_high], none of the numbers itself, that some
expression over two to `max_needed` of them reaches with `operators` (every step a whole number, the reward's
default rule); problems are distinct by numbers and target however asked (`problem_key`). The solver (`solve`)
enumerates every expression over the numbers, so a row is solvable by construction and `solutions` counts the
distinct right expressions (commuted forms once); `grpokit data generate` reports its time (nearly all of it is the
solver's).
Questions are asked in one of PHRASINGS; REWRITTEN holds phrasings for evaluation only (the `rewritten` variant),
and the `harder` variant gives each held-out row one more number and a target that needs at least three of them.

The audit's tricks: grpokit.families.countdown_tricks. Not covered: phrasings in other languages.
"""
from __future__ import annotations

import itertools
import math
import random
import re
from fractions import Fraction

from grpokit.errors import Problem
from grpokit.families.base import AnswerForm, Demo, Family, Generator, Option, Variant
from grpokit.families.countdown_solver import MAX_COUNT, operators_of, reference_solution, solve
from grpokit.families.countdown_tricks import COUNTDOWN_TRICKS, honest_answers, prepare_countdown_row
from grpokit.rewards.countdown import (OPERATORS, Refused, evaluate_expression, row_numbers, row_operators, whole,
                                       worked_steps)

# Question phrasings for training rows ({numbers}: "3, 4 and 7"; {target}); a row's `kind` indexes ALL_PHRASINGS.
PHRASINGS: tuple[str, ...] = (
    "Using the numbers {numbers}, make {target}.",
    "Numbers: {numbers}. Target: {target}.",
    "Combine {numbers} to get {target}.",
    "Reach {target} with the numbers {numbers}.",
)
# Kept for evaluation only: `generate` never draws them (the `rewritten` variant asks held-out rows in these words).
REWRITTEN: tuple[str, ...] = (
    "Which calculation with {numbers} gives {target}?",
    "Find a way to turn {numbers} into {target}.",
    "Target {target}; available numbers {numbers}. Give the calculation.",
    "Write {target} as a calculation that uses {numbers}.",
)
ALL_PHRASINGS = PHRASINGS + REWRITTEN

# 4 numbers and targets to 30: a median of 6 right expressions a problem (3 numbers: 1), most needing one or two
# operations, as TinyZero advises for models that "guess" (docs/measurements.md "Countdown: where many answers are right").
DEFAULTS = {"count": 4, "low": 1, "high": 10, "operators": "+-*", "target_low": 2, "target_high": 30, "max_needed": 3}
_TRIES = 200  # draws of numbers before a row with a target in range is given up (a setting with none raises)


# ---------------------------------------------------------------- rows
def said_numbers(numbers) -> str:
    """3, 4 and 7"""
    items = [str(n) for n in numbers]
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def make_row(kind: int, numbers: list[int], target: int, solutions: list[str], operators: str) -> dict:
    question = ALL_PHRASINGS[kind].format(numbers=said_numbers(numbers), target=target)
    return {"question": question, "answer": reference_solution(solutions), "numbers": list(numbers),
            "target": int(target), "kind": kind, "solutions": len(solutions), "operators": operators}


def _check_knobs(count: int, low: int, high: int, operators: str, target_low: int, target_high: int) -> None:
    if not 2 <= count <= MAX_COUNT:
        raise ValueError(f"--numbers must be 2 to {MAX_COUNT} (the solver enumerates every expression), got {count}")
    if not 1 <= low <= high <= 1000:
        raise ValueError(f"numbers must satisfy 1 <= low <= high <= 1000, got {low}..{high}")
    if not operators or set(operators) - set(OPERATORS):
        raise ValueError(f"--operators must be some of {OPERATORS!r}, got {operators!r}")
    if not 1 <= target_low <= target_high:
        raise ValueError(f"targets must satisfy 1 <= low <= high, got {target_low}..{target_high}")


def draw_row(rng: random.Random, kind: int, count: int, low: int, high: int, operators: str, target_low: int,
             target_high: int, max_needed: int, seen: set[str] | None = None) -> dict | None:
    """One solvable row (module docstring), or None when `_TRIES` draws found no target in range that is new."""
    for _ in range(_TRIES):
        numbers = [rng.randint(low, high) for _ in range(count)]
        solutions = solve(numbers, operators)
        targets = _targets(numbers, solutions, target_low, target_high, max_needed)
        rng.shuffle(targets)
        for target in targets[:3]:
            row = make_row(kind, numbers, target, solutions[Fraction(target)], operators)
            if seen is None or not {row["question"], problem_key(row)} & seen:
                return row
    return None


def problem_key(row: dict) -> str:
    """One problem however it is asked: its numbers (in any order) and target, so that a held-out problem is never
    a training problem in other words."""
    return f"countdown:{sorted(row_numbers(row['numbers']) or [])}:{whole(row['target'])}"


_QUESTION_FORMS = [re.compile(re.escape(p).replace(re.escape("{numbers}"), r"(?P<numbers>\d+(?:, \d+)* and \d+)")
                              .replace(re.escape("{target}"), r"(?P<target>\d+)") + "$") for p in ALL_PHRASINGS]


def question_key(question: str) -> str | None:
    """The problem key of a question in one of ALL_PHRASINGS (None for any other text): `--exclude FILE` excludes
    the problems, not only the questions, of its rows."""
    for form in _QUESTION_FORMS:
        m = form.match(str(question).strip())
        if m:
            numbers = [int(n) for n in re.findall(r"\d+", m["numbers"])]
            return problem_key({"numbers": numbers, "target": int(m["target"])})
    return None


def _numbers_in(text: str) -> int:
    return sum(c.isdigit() and (i == 0 or not text[i - 1].isdigit()) for i, c in enumerate(text))


def generate(rows: int, seed: int = 0, exclude: set[str] | None = None, count: int = DEFAULTS["count"],
             low: int = DEFAULTS["low"], high: int = DEFAULTS["high"], operators: str = DEFAULTS["operators"],
             target_low: int = DEFAULTS["target_low"], target_high: int = DEFAULTS["target_high"],
             max_needed: int = DEFAULTS["max_needed"]) -> list[dict]:
    """`rows` distinct solvable problems (module docstring); problems (numbers and target, however asked) in
    `exclude` are never produced."""
    _check_knobs(count, low, high, operators, target_low, target_high)
    if not 2 <= max_needed:
        raise ValueError(f"--max-needed must be at least 2 (one operation), got {max_needed}")
    # no more problems exist than multisets of numbers times targets: past that, refuse at once rather than draw
    # until _TRIES draws fail (a --rows 1000000 spun for minutes)
    most = math.comb(high - low + count, count) * (target_high - target_low + 1)
    if rows > most:
        raise ValueError(f"at most {most:,} distinct problems exist with these numbers and targets, asked for "
                         f"{rows:,}: widen the numbers (--low/--high) or the targets, or ask for fewer rows")
    rng, seen, out = random.Random(seed), set(exclude or ()), []
    seen |= {k for k in map(question_key, exclude or ()) if k}
    settings = (count, low, high, operators, target_low, target_high, max_needed)
    enumerable = math.comb(high - low + count, count) <= _MAX_ENUMERATED
    # Most multisets and targets have no expression (4 numbers 1-10, targets 2-30: 10,722 of the 20,735), so the
    # count above overstates what exists: past a quarter of it, count the problems that do (every multiset solved
    # once, fewer solves than the rows need) and refuse at once rather than draw for minutes and then refuse.
    pool = _pool(rows, seen, exclude, settings) if rows > most // 4 and enumerable else None
    while len(out) < rows:
        row = draw_row(rng, rng.randrange(len(PHRASINGS)), count, low, high, operators, target_low, target_high,
                       max_needed, seen=seen)
        if row is None and enumerable:  # near the bound random draws rarely find a new problem: take the rest
            pool = pool if pool is not None else _pool(rows, seen, exclude, settings, made=len(out))
            return out + _rows_from_pool(rng, pool, seen, rows - len(out), operators)
        if row is None:
            raise ValueError(f"no new solvable problem found in {_TRIES} draws after {len(out)} rows: widen the "
                             "numbers (--low/--high), the targets or the operators, or ask for fewer rows")
        seen.update((row["question"], problem_key(row)))
        out.append(row)
    return out


def _pool(rows: int, seen: set[str], exclude, settings: tuple, made: int = 0) -> list:
    """The problems not yet `seen` (`made` rows already drawn), refused at once when fewer than the rows left."""
    pool = [p for p in solvable_problems(*settings) if _pool_key(p) not in seen]
    if rows - made > len(pool):
        besides = " besides the excluded ones" if exclude else ""
        raise ValueError(f"{len(pool) + made:,} distinct solvable problems exist with these numbers, targets and "
                         f"operators{besides}, asked for {rows:,}: widen the numbers (--low/--high), the targets or "
                         "the operators, or ask for fewer rows")
    return pool


_MAX_ENUMERATED = 5_000  # multisets solved to count the problems that exist (4 numbers 1-10: 715; 5 numbers 1-10: 2,002)


def solvable_problems(count: int, low: int, high: int, operators: str, target_low: int, target_high: int,
                      max_needed: int) -> list[tuple[tuple[int, ...], int]]:
    """Every distinct problem `generate` can make with these settings: (numbers, target), numbers sorted, target
    reached by an expression over at most `max_needed` of them, not one of the numbers."""
    out = []
    for numbers in itertools.combinations_with_replacement(range(low, high + 1), count):
        out += [(numbers, t) for t in _targets(list(numbers), solve(list(numbers), operators), target_low,
                                               target_high, max_needed)]
    return out


def _targets(numbers: list[int], solutions: dict, target_low: int, target_high: int, max_needed: int) -> list[int]:
    return sorted(int(v) for v, texts in solutions.items()
                  if v.denominator == 1 and target_low <= v <= target_high and int(v) not in numbers
                  and min(_numbers_in(t) for t in texts) <= max_needed)


def _pool_key(problem: tuple[tuple[int, ...], int]) -> str:
    return problem_key({"numbers": list(problem[0]), "target": problem[1]})


def _rows_from_pool(rng: random.Random, pool: list, seen: set[str], rows: int, operators: str) -> list[dict]:
    """`rows` rows of the problems in `pool` not yet `seen`, in a seeded order, numbers shuffled as drawn ones are."""
    left = [p for p in pool if _pool_key(p) not in seen]
    rng.shuffle(left)
    out = []
    for numbers, target in left[:rows]:
        numbers = list(numbers)
        rng.shuffle(numbers)
        out.append(make_row(rng.randrange(len(PHRASINGS)), numbers, target,
                            solve(numbers, operators)[Fraction(target)], operators))
        seen.update((out[-1]["question"], problem_key(out[-1])))
    return out


def is_generated(row: dict) -> bool:
    """An unedited row of this task: its question is what its kind, numbers and target produce."""
    numbers, kind = row_numbers(row.get("numbers")), whole(row.get("kind"))
    target = whole(row.get("target"))
    if numbers is None or kind is None or target is None or not 0 <= kind < len(ALL_PHRASINGS):
        return False
    return ALL_PHRASINGS[kind].format(numbers=said_numbers(numbers), target=target) == row.get("question")


def in_training_words(row: dict) -> bool:
    return is_generated(row) and int(row["kind"]) < len(PHRASINGS)


def rewrite_rows(rows: list[dict], seed: int = 0, exclude: set[str] | None = None) -> list[dict]:
    """The same problems (numbers, target, answer) asked in an evaluation-only phrasing (REWRITTEN, seeded)."""
    rng = random.Random(seed)
    out = []
    for r in rows:
        kind = len(PHRASINGS) + rng.randrange(len(REWRITTEN))
        out.append({**r, "kind": kind, "question": ALL_PHRASINGS[kind].format(
            numbers=said_numbers(row_numbers(r["numbers"])), target=whole(r["target"]))})
    return out


def harder_rows(rows: list[dict], seed: int = 0, exclude: set[str] | None = None) -> list[dict]:
    """Each row with one more number (drawn in the row's range) and a new target that needs at least three numbers
    (two operations), in the row's phrasing; questions in `exclude` are never produced."""
    rng, exclude, out = random.Random(seed), set(exclude or ()), []
    for r in rows:
        numbers = row_numbers(r["numbers"])
        low, high = min(numbers), max(max(numbers), DEFAULTS["high"])
        row = None
        for _ in range(_TRIES):
            row = _harder_row(rng, numbers + [rng.randint(low, high)], int(r["kind"]), operators_of(r), exclude)
            if row is not None:
                break
        if row is None:
            raise ValueError(f"no harder problem found for {r['question']!r}")
        out.append({**r, **row})
    return out


def _harder_row(rng: random.Random, numbers: list[int], kind: int, operators: str, exclude: set[str]) -> dict | None:
    solutions = solve(numbers, operators)
    targets = [int(v) for v, texts in solutions.items()
               if v.denominator == 1 and DEFAULTS["target_low"] <= v <= DEFAULTS["target_high"]
               and int(v) not in numbers and min(_numbers_in(t) for t in texts) >= 3]
    rng.shuffle(targets)
    for target in targets:
        row = make_row(kind, numbers, target, solutions[Fraction(target)], operators)
        if row["question"] not in exclude:
            return row
    return None


# ---------------------------------------------------------------- checking rows
def row_problems(row: dict, where: str, answer_column: str | None) -> list[Problem]:
    """A row the countdown reward cannot judge: `numbers` not a list of whole numbers, `target` not a whole number,
    or a gold `answer` that is not a right expression over them (when the row has one)."""
    numbers, target = row_numbers(row.get("numbers")), whole(row.get("target"))
    if numbers is None:
        return [Problem(f"{where} field numbers", f"{str(row.get('numbers'))[:40]!r} is not a list of whole numbers",
                        'write the numbers as a JSON list, e.g. "numbers": [3, 4, 7]')]
    if target is None:
        return [Problem(f"{where} field target", f"{str(row.get('target'))[:40]!r} is not a whole number",
                        'write the target as a number, e.g. "target": 16')]
    if row_operators(row.get("operators")) is None:
        return [Problem(f"{where} field operators", f"{str(row.get('operators'))[:40]!r} is not some of {OPERATORS!r}",
                        'write the operators the row allows as one string, e.g. "operators": "+-*", or drop the field '
                        "(all four are allowed then)")]
    answer = row.get(answer_column or "answer")
    if isinstance(answer, str) and answer.strip():
        try:
            value, _ = evaluate_expression(answer, numbers, operators_of(row))
        except Refused as e:
            return [Problem(f"{where} field answer", f"{answer[:40]!r} is not a usable expression ({e})",
                            "give one expression over the row's numbers that equals its target, or no answer")]
        if value != target:
            return [Problem(f"{where} field answer", f"{answer[:40]!r} is {value}, not the target {target}",
                            "give one expression over the row's numbers that equals its target, or no answer")]
    return []


def has_numbers(row: dict) -> bool:
    """Rows the countdown reward judges without a gold answer (their numbers and target are enough)."""
    return "numbers" in row and "target" in row


# ---------------------------------------------------------------- what SFT teaches
def reference(row: dict, marker: str) -> str | None:
    """The solver's expression worked step by step (`7 - 3 = 4`, `4 * 4 = 16`), then the answer line; None for a
    row without a usable answer."""
    numbers, answer = row_numbers(row.get("numbers")), row.get("answer")
    if numbers is None or not isinstance(answer, str):
        return None
    try:
        steps = worked_steps(answer, numbers, operators_of(row))
    except Refused:
        return None
    sep = "" if marker.endswith("：") else " "
    return "\n".join([*steps, f"{marker}{sep}{answer}"])


# ---------------------------------------------------------------- the row
DEMOS = {
    "sft-vs-grpo-countdown": Demo(
        "sft_vs_grpo", "runs/sft-vs-grpo-countdown",
        "SFT on one solver solution per row, GRPO, SFT then GRPO and GRPO then SFT on countdown problems (many right "
        "expressions), each final model on held-out, rewritten and harder problems",
        recipes=("smollm2-countdown-sft.yaml", "smollm2-countdown.yaml")),
}

FAMILY = Family(
    "countdown", "one expression over the row's numbers that equals its target (countdown)",
    check="every row needs whole `numbers` and a whole `target`; a gold answer must reach the target",
    row_problems=row_problems, without_answer=has_numbers,
    make_data="`grpokit data generate countdown FILE` (generated countdown problems)",
    generators={"countdown": Generator(generate, "a few small numbers and a target; many expressions reach it", (
        Option("numbers", "count", int, f"countdown: how many numbers a problem gives (2-{MAX_COUNT}, default "
               f"{DEFAULTS['count']})"),
        Option("low", "low", int, f"countdown: the smallest number (default {DEFAULTS['low']})"),
        Option("high", "high", int, f"countdown: the largest number (default {DEFAULTS['high']})"),
        Option("operators", "operators", str, f"countdown: the operators, some of '{OPERATORS}' (default "
               f"'{DEFAULTS['operators']}')"),
        Option("target-low", "target_low", int, f"countdown: the smallest target (default {DEFAULTS['target_low']})"),
        Option("target-high", "target_high", int, f"countdown: the largest target (default "
               f"{DEFAULTS['target_high']})"),
        Option("max-needed", "max_needed", int, "countdown: the most numbers the shortest right expression may "
               f"use (default {DEFAULTS['max_needed']}: one or two operations)")))},
    variants=(Variant("rewritten", "the same held-out problems asked in words no training row uses (the same numbers "
                      "and target)", in_training_words, rewrite_rows,
                      "generated countdown rows in a training phrasing (kind/numbers/target matching the question)",
                      "rewritten wording"),
              Variant("harder", "each held-out problem with one more number and a target that needs at least three "
                      "of them", is_generated, harder_rows,
                      "generated countdown rows (kind/numbers/target matching the question)",
                      "harder (one more number)")),
    audit=AnswerForm("countdown tricks", "`numbers` and a `target`", COUNTDOWN_TRICKS, prepare_countdown_row,
                     honest_answers),
    demos=DEMOS, reference=reference,
)
