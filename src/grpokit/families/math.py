"""The math family: answers read as numbers on an answer line (`math_correctness`, `format`), and the generated
arithmetic task.

    grpokit data check train.jsonl --task math              # warns about gold answers that are not numbers
    grpokit data generate arithmetic train.jsonl --rows 500 --seed 1
    grpokit data perturb eval.jsonl eval-perturbed.jsonl --seed 1
    grpokit data rewrite eval.jsonl eval-rewritten.jsonl    # the same problems in evaluation-only words
    grpokit demo                                            # the arithmetic demo

What counts as a number is the math reward's own reading (grpokit.rewards.is_numeric_answer: its `parse_gold`
+ `parse_number`), so `data check` and `math_correctness` agree on "18元", "1,225 stamps", "$3.50" and "1/2".

The generated task: small additions and subtractions in English. Rows are `{question, answer, a, b, op, kind}`.
The operands are kept in the row so that `perturb_row` can redraw the numbers of a problem and recompute its
answer (the memorisation check of evaluation: the family's `perturbed` variant). Problems are phrased as bare
sums ("What is 17 + 25?") or short word problems, so a model has to read the question rather than pattern-match
one layout. REWRITTEN holds phrasings that `generate` never uses: evaluation asks the held-out problems in them
too (the `rewritten` variant), so new wording is measured apart from new numbers. Small numbers keep the task learnable by a 135M model in minutes on a CPU.

The family's audit is the answer-line form (grpokit.families.answer_lines: refusals, hedges, a bare guessed line,
the gold's digits rearranged, ...), built from each row with the recipe's own answer markers.
"""
from __future__ import annotations

import random
import re

from grpokit.errors import Problem
from grpokit.families.answer_lines import FORM as ANSWER_LINES
from grpokit.families.base import Demo, Family, Generator, Variant
from grpokit.rewards import is_numeric_answer

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
# Phrasings kept for evaluation only (`generate` never draws them): the family's `rewritten` variant asks the
# held-out problems in these words, so a model that learned the training wording rather than the sums shows it
# (the 0.6B article's "rewritten questions"). A kind >= len(PHRASINGS) is one of these.
REWRITTEN: tuple[tuple[str, str], ...] = (
    ("Add {a} and {b}. What do you get?", "+"),
    ("Subtract {b} from {a}. What is the result?", "-"),
    ("A jar holds {a} marbles and someone drops in {b} more. How many marbles are in the jar?", "+"),
    ("Sam had {a} stickers and gave {b} of them to a friend. How many stickers does Sam keep?", "-"),
    ("What is the sum of {a} and {b}?", "+"),
    ("What is the difference between {a} and {b}?", "-"),
)
ALL_PHRASINGS = PHRASINGS + REWRITTEN  # a row's `kind` indexes this
_PERTURB_TRIES = 100  # a phrasing has ~1200 operand pairs; 100 misses in a row means train covers nearly all
MAX_OPERAND = 50  # two-digit sums stay within what a 135M model can learn in a few dozen steps
# Distinct problems `generate` draws at most: about half the operand pairs per phrasing (a subtraction's operands are
# ordered), well inside what exists, so drawing the last ones stays quick.
MOST_ROWS = len(PHRASINGS) * (MAX_OPERAND - 1) ** 2 // 2


def _draw(rng: random.Random, op: str) -> tuple[int, int]:
    a, b = rng.randint(2, MAX_OPERAND), rng.randint(2, MAX_OPERAND)
    if op == "-" and b > a:  # keep answers non-negative: they are counts
        a, b = b, a
    return a, b


def make_row(kind: int, a: int, b: int) -> dict:
    template, op = ALL_PHRASINGS[kind]
    answer = a + b if op == "+" else a - b
    return {"question": template.format(a=a, b=b), "answer": str(answer), "a": a, "b": b, "op": op, "kind": kind}


def generate(rows: int, seed: int = 0, exclude: set[str] | None = None) -> list[dict]:
    """`rows` distinct problems; questions in `exclude` are never produced."""
    rng = random.Random(seed)
    seen = set(exclude or ())
    out = []
    if rows + len(seen) > MOST_ROWS:
        raise ValueError(f"at most {MOST_ROWS:,} distinct problems are drawn; asked for {rows:,}"
                         + (f" besides the {len(seen):,} excluded" if seen else ""))
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
        a, b = _draw(rng, ALL_PHRASINGS[kind][1])
        if (a, b) != (row.get("a"), row.get("b")):
            return make_row(kind, a, b)


def is_generated(row: dict) -> bool:
    """True for an unedited row of this task (its question is exactly what its kind/a/b produce)."""
    try:
        kind, a, b = int(row["kind"]), int(row["a"]), int(row["b"])
    except (KeyError, TypeError, ValueError):
        return False
    return 0 <= kind < len(ALL_PHRASINGS) and make_row(kind, a, b)["question"] == row.get("question")


def in_training_words(row: dict) -> bool:
    """A generated row phrased as training rows are (not one of the evaluation-only REWRITTEN phrasings)."""
    return is_generated(row) and int(row["kind"]) < len(PHRASINGS)


def rewrite_rows(rows: list[dict], seed: int = 0, exclude: set[str] | None = None) -> list[dict]:
    """The same problems (numbers, operation, answer) asked in an evaluation-only phrasing (REWRITTEN, seeded);
    other columns of a row are kept. A rewritten question found in `exclude` (a training file someone made from
    these phrasings) gets new numbers, as `perturb_rows` does."""
    bad = [i for i, r in enumerate(rows) if not in_training_words(r)]
    if bad:
        raise ValueError(f"{len(bad)} row(s) are not generated arithmetic rows in the training phrasings (first: "
                         f"row {bad[0] + 1}); only rows with kind/a/b whose question matches them can be rewritten")
    rng, exclude = random.Random(seed), exclude or set()
    out = []
    for r in rows:
        op = PHRASINGS[int(r["kind"])][1]
        kinds = [len(PHRASINGS) + i for i, (_, o) in enumerate(REWRITTEN) if o == op]
        new = make_row(rng.choice(kinds), int(r["a"]), int(r["b"]))
        for _ in range(_PERTURB_TRIES):
            if new["question"] not in exclude:
                break
            new = perturb_row(new, rng)
        out.append({**r, **new})
    return out


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


# ---------------------------------------------------------------- reading answers
def answer_problem(answer: object, where: str) -> Problem | None:
    """A warning for a gold answer math_correctness does not read as a number (a warning: an expression it
    compares symbolically is not a number and still fine)."""
    if is_numeric_answer(answer):
        return None
    return Problem(where, f"answer {str(answer)[:40]!r} is not a number, on a numeric task "
                   "(math_correctness reads numbers with units, currency, 1,225 and 1/2)",
                   "write the final number (GSM8K's `... #### 72` is fine); ignore this if answers are expressions "
                   "math_correctness compares symbolically")


# ---------------------------------------------------------------- what SFT teaches
_CALC = re.compile(r"<<[^<>]*>>")  # GSM8K's calculator annotations: not something a model should learn to write


def reference(row: dict, marker: str) -> str | None:
    """The worked solution of a math row for `grpokit sft`: a GSM8K answer (`reasoning ... #### 72`) becomes its
    reasoning (calculator annotations dropped) then the answer line; a generated arithmetic row (kind/a/b/op)
    `a op b = answer` then the line; None for any other row (the answer line alone is all it gives)."""
    answer = str(row["answer"]).strip()
    sep = "" if marker.endswith("：") else " "  # a full-width colon takes no space after it
    if "####" in answer:
        reasoning, _, final = answer.rpartition("####")
        lines = [_CALC.sub("", ln).strip() for ln in reasoning.strip().splitlines() if ln.strip()]
        return "\n".join([*lines, f"{marker}{sep}{final.strip()}"])
    if all(k in row for k in ("a", "b", "op")):
        return f"{row['a']} {row['op']} {row['b']} = {answer}\n{marker}{sep}{answer}"
    return None


# ---------------------------------------------------------------- the row
DEMOS = {
    "arithmetic": Demo("warm_start", "runs/demo",
                       "an SFT warm start on worked solutions, then GRPO from it, on generated additions/subtractions "
                       "(recipes/smollm2-arithmetic-sft.yaml, then recipes/smollm2-arithmetic.yaml)",
                       recipes=("smollm2-arithmetic-sft.yaml", "smollm2-arithmetic.yaml")),
    "arithmetic-grpo": Demo("arithmetic", "runs/demo-grpo",
                            "GRPO from the base model alone on the arithmetic task (recipes/smollm2-arithmetic.yaml)"),
    "sft-vs-grpo": Demo("sft_vs_grpo", "runs/sft-vs-grpo",
                        "SFT, GRPO, SFT then GRPO and GRPO then SFT on the arithmetic task, each final model on "
                        "held-out, perturbed and rewritten questions (the 0.6B-Base article's experiment)",
                        recipes=("smollm2-arithmetic-sft.yaml", "smollm2-arithmetic.yaml")),
}

FAMILY = Family(
    "math", "a number on an answer line (math_correctness, format)",
    check="warn about answers the math reward does not read as numbers",
    answer_problem=answer_problem, audit=ANSWER_LINES, answer_note="are not numbers although math_correctness scores this recipe",
    make_data="`grpokit data generate arithmetic FILE` (generated arithmetic)",
    generators={"arithmetic": Generator(generate, "additions and subtractions", most=MOST_ROWS)},
    variants=(Variant("perturbed", "the same held-out questions with new numbers and recomputed answers (never a "
                      "training question)", is_generated, perturb_rows,
                      "generated arithmetic rows (kind/a/b matching the question)", "perturbed numbers"),
              Variant("rewritten", "the same held-out problems asked in words no training row uses (phrasings kept "
                      "for evaluation only; the same numbers and answers)", in_training_words, rewrite_rows,
                      "generated arithmetic rows in a training phrasing (kind/a/b matching the question)",
                      "rewritten wording")),
    demos=DEMOS, reference=reference,
)
