"""The countdown family: its verifier (grpokit.rewards.countdown) against hostile answers, the solver's
completeness on generated rows, the generator's knobs and variants, the row checks, the audit and the CLI."""
from __future__ import annotations

import itertools
import json
import subprocess
import sys
from fractions import Fraction

import pytest

from grpokit.families import FAMILIES
from grpokit.families.countdown import (ALL_PHRASINGS, PHRASINGS, generate, harder_rows, is_generated,
                                        problem_key, question_key, reference, rewrite_rows, row_problems,
                                        solvable_problems)
from grpokit.families.countdown_solver import solve
from grpokit.rewards.countdown import check_countdown, evaluate_expression, worked_steps
from grpokit.rewards.registry import build_reward
from tests.conftest import REPO

N, T = [3, 4, 7, 9], 16  # (7 - 3) * 4 = 16, 9 + 7 = 16, ...

# (id, answer line's value, expected reward, expected reason's key)
CASES = [
    ("right, parenthesised", "(7 - 3) * 4", 1.0, ""),
    ("right, another expression", "9 + 7", 1.0, ""),
    ("right, commuted", "4 * (7 - 3)", 1.0, ""),
    ("right, with its claimed result", "(7 - 3) * 4 = 16", 1.0, ""),
    ("right, a full stop after it", "9 + 7.", 1.0, ""),
    ("right, Unicode times and minus", "(7 − 3) × 4", 1.0, ""),
    ("right, full-width digits and plus", "９＋７", 1.0, ""),
    ("right, no spaces", "(7-3)*4", 1.0, ""),
    ("a well-formed miss earns the format score", "3 + 4 + 7", 0.1, "misses_target"),
    ("a number not given", "8 + 8", 0.0, "number_not_given"),
    ("a given number used twice", "7 + 7 + 3 - 1", 0.0, "number_not_given"),
    ("reuse of a number given once", "9 + 7 - 7 + 7", 0.0, "number_reused"),
    ("the target restated", "16", 0.0, "number_not_given"),
    ("the target times one", "16 * 1", 0.0, "number_not_given"),
    ("a bare given number", "9", 0.1, "misses_target"),
    ("a claimed result that is not the value", "3 + 4 = 16", 0.0, "wrong_claim"),
    ("something after the claimed result", "9 + 7 = 16 + 0", 0.0, "not_an_expression"),
    ("words around the expression", "I think 9 + 7", 0.0, "text"),
    ("words after the expression", "9 + 7 works", 0.0, "text"),
    ("two expressions offered", "9 + 7 or (7 - 3) * 4", 0.0, "text"),
    ("a power, Python style", "4 ** 2", 0.0, "power"),
    ("a power, caret", "4 ^ 2", 0.0, "power"),
    ("a superscript power", "4²", 0.0, "not_an_expression"),
    ("a Roman numeral", "Ⅻ + 4", 0.0, "not_an_expression"),
    ("a vulgar fraction", "½ * 32", 0.0, "not_an_expression"),
    ("a decimal", "9.5 + 6.5", 0.0, "not_whole"),
    ("division by zero", "9 / (7 - 3 - 4)", 0.0, "division_by_zero"),
    ("a non-whole step is refused", "7 / 3 * 9 - 4", 0.0, "not_whole"),
    ("a sign in front of a number", "-3 + 19", 0.0, "sign"),
    ("code", "__import__('os').system('id')", 0.0, "not_an_expression"),
    ("an eval call", "eval('9+7')", 0.0, "text"),
    ("a lambda", "(lambda: 16)()", 0.0, "text"),
    ("deep nesting", "(" * 40 + "9 + 7" + ")" * 40, 0.0, "too_deep"),
    ("deep nesting past the parser's stack", "(" * 5000 + "9" + ")" * 5000, 0.0, "too_long"),
    ("an unclosed parenthesis", "(9 + 7", 0.0, "not_an_expression"),
    ("an operator without a number", "9 + * 7", 0.0, "not_an_expression"),
    ("an empty answer line", "", 0.0, "not_an_expression"),
    ("a huge number", "9" * 150, 0.0, "number_not_given"),
]


@pytest.mark.parametrize("value, reward, reason", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_countdown_verdicts(value, reward, reason):
    v = check_countdown(f"7 - 3 = 4\n4 * 4 = 16\nFinal answer: {value}", N, T)
    assert v.reward == pytest.approx(reward)
    assert v.reason.split(":")[0] == reason


# (id, completion, expected reward, reason key): what surrounds the answer line
LINE_CASES = [
    ("no answer line", "9 + 7 = 16", 0.0, "no_answer"),
    ("two answer lines that agree", "Final answer: 9 + 7\nFinal answer: 9 + 7", 1.0, ""),
    ("two answer lines that differ", "Final answer: 3 + 4\nFinal answer: 9 + 7", 0.0, "several_answers"),
    ("a hedge on the next line", "Final answer: 9 + 7\nor maybe 4 * 4", 0.0, "text_after"),
    ("the answer on the line after the marker", "Final answer:\n9 + 7", 1.0, ""),
    ("an unclosed think block", "<think>\nFinal answer: 9 + 7", 0.0, "unclosed_think"),
    ("the answer after a think block", "<think>\n9 + 7 = 16\n</think>\nFinal answer: 9 + 7", 1.0, ""),
    ("a 100k-character completion", "x" * 100_000 + "\nFinal answer: 9 + 7", 1.0, ""),
]


@pytest.mark.parametrize("completion, reward, reason", [c[1:] for c in LINE_CASES], ids=[c[0] for c in LINE_CASES])
def test_countdown_answer_lines(completion, reward, reason):
    v = check_countdown(completion, N, T)
    assert v.reward == pytest.approx(reward)
    assert v.reason.split(":")[0] == reason


def test_rule_knobs():
    # integer_steps off: 7 / 7 * ... fractions are allowed when the variant allows them
    assert check_countdown("Final answer: 9 / 3 * 4 + 4", [9, 3, 4, 4], 16).reward == 1.0
    assert check_countdown("Final answer: 7 / 2 * 4 + 2", [7, 2, 4, 2], 16, integer_steps=True).reason.startswith(
        "not_whole")
    assert check_countdown("Final answer: 7 / 2 * 4 + 2", [7, 2, 4, 2], 16, integer_steps=False).reward == 1.0
    # an operator the variant does not allow
    assert check_countdown("Final answer: 4 * 4", [4, 4], 16, operators="+-").reason.startswith(
        "operator_not_allowed")
    assert check_countdown("Final answer: 3 + 4", N, T, format_score=0.0).reward == 0.0


def test_reward_through_the_registry():
    reward = build_reward("countdown")
    out = reward(prompts=["p"] * 4, completions=["Final answer: 9 + 7", "Final answer: 9 + 9", "Final answer: 3 + 4",
                                                 "Final answer: 9 + 7"],
                 numbers=[N, N, N, "not numbers"], target=[T, T, T, T])
    assert out == [1.0, 0.0, 0.1, None]  # the last row does not apply: its numbers are not numbers
    # numbers from a CSV cell; a target written as a float that is whole
    assert reward(prompts=["p"], completions=["Final answer: 9 + 7"], numbers=["[3, 4, 7, 9]"], target=[16.0]) == [1.0]
    with pytest.raises(ValueError, match="operators"):
        build_reward("countdown", {"operators": "+-^"})
    explained = reward.scorer.explain("Final answer: 9 + 9", numbers=N, target=T)
    assert explained["reason"].startswith("number_reused")


def test_reward_honours_the_rows_operators():
    """The row's `operators` column is the task the prompt sets and SFT teaches: division on a row of + - * is
    refused, though it reaches the target; rows without the column take the reward's param (default all four)."""
    reward = build_reward("countdown")
    rows = {"numbers": [[2, 2, 6, 8]] * 3, "target": [4] * 3}
    out = reward(prompts=["p"] * 3, completions=["Final answer: 8 / 2"] * 3, operators=["+-*", None, "+-*/"], **rows)
    assert out == [0.0, 1.0, 1.0]
    assert reward(prompts=["p"], completions=["Final answer: 8 / 2"], numbers=[[2, 2, 6, 8]], target=[4]) == [1.0]
    no_division = build_reward("countdown", {"operators": "+-*"})
    assert no_division(prompts=["p"], completions=["Final answer: 8 / 2"], numbers=[[2, 2, 6, 8]], target=[4]) == [0.0]
    # the row's own column wins over the param, both ways
    assert no_division(prompts=["p"], completions=["Final answer: 8 / 2"], numbers=[[2, 2, 6, 8]], target=[4],
                       operators=["+-*/"]) == [1.0]
    explained = reward.scorer.explain("Final answer: 8 / 2", numbers=[2, 2, 6, 8], target=4, operators="+-*")
    assert explained["reason"].startswith("operator_not_allowed")
    # a column that names no usable operators: the row does not apply (data check names it, test_row_problems)
    assert reward(prompts=["p"], completions=["Final answer: 8 / 2"], operators=["+^"], **{k: v[:1] for k, v in
                                                                                        rows.items()}) == [None]


def test_worked_steps_are_the_expression_computed():
    assert worked_steps("(7 - 3) * 4", N) == ["7 - 3 = 4", "4 * 4 = 16"]
    assert worked_steps("9 + 7", N) == ["9 + 7 = 16"]


# ---------------------------------------------------------------- the solver
def _brute_force_values(numbers, operators="+-*"):
    """Every value of every expression over >= 2 of the numbers, by a different route: every ordered selection
    and every full binary tree over it (Catalan), each evaluated with the reward's own parser."""
    values = set()

    def trees(items):
        if len(items) == 1:
            yield str(items[0])
            return
        for i in range(1, len(items)):
            for left in trees(items[:i]):
                for right in trees(items[i:]):
                    for op in operators:
                        yield f"({left} {op} {right})"

    for k in range(2, len(numbers) + 1):
        for chosen in itertools.permutations(numbers, k):
            for text in trees(list(chosen)):
                try:
                    values.add(evaluate_expression(text, numbers, operators)[0])
                except ValueError:
                    pass
    return values


@pytest.mark.parametrize("numbers", [[3, 4, 7], [2, 2, 5], [1, 9, 9, 4], [10, 6, 3, 8]])
def test_solver_finds_every_value(numbers):
    found = solve(numbers, "+-*")
    assert set(found) == _brute_force_values(numbers)
    for value, texts in found.items():  # and every expression it writes is right by the reward's reading
        for text in texts[:5]:
            assert evaluate_expression(text, numbers, "+-*")[0] == value


def test_every_generated_row_is_solvable_and_its_answer_right():
    rows = generate(200, seed=3)
    assert len({problem_key(r) for r in rows}) == 200
    for r in rows:
        assert is_generated(r) and r["kind"] < len(PHRASINGS)
        assert check_countdown(f"Final answer: {r['answer']}", r["numbers"], r["target"]).reward == 1.0
        assert r["solutions"] == len(solve(r["numbers"], r["operators"])[Fraction(r["target"])])
        assert r["target"] not in r["numbers"]
        assert row_problems(r, "row", None) == []
        completion = reference(r, "Final answer:")
        assert completion.endswith(f"Final answer: {r['answer']}")
        assert build_reward("countdown")(prompts=["p"], completions=[completion], numbers=[r["numbers"]],
                                         target=[r["target"]]) == [1.0]


def test_generator_knobs_and_exclusion():
    rows = generate(30, seed=0, count=3, low=2, high=6, operators="+-", target_low=5, target_high=9, max_needed=2)
    for r in rows:
        assert len(r["numbers"]) == 3 and all(2 <= n <= 6 for n in r["numbers"]) and 5 <= r["target"] <= 9
        assert "*" not in r["answer"] and r["answer"].count(" ") == 2  # one operation
    # the same seed, the same rows; problems of `exclude` (by their question, in any phrasing) never come back
    assert generate(30, seed=0, count=3, low=2, high=6, operators="+-", target_low=5, target_high=9,
                    max_needed=2) == rows
    first = generate(40, seed=0)
    again = generate(40, seed=0, exclude={rewrite_rows([r])[0]["question"] for r in first})
    assert not {problem_key(r) for r in again} & {problem_key(r) for r in first}
    with pytest.raises(ValueError, match="6 distinct solvable problems exist"):  # fewer solvable problems exist than asked for
        generate(100, seed=0, count=2, low=1, high=3, operators="+")
    with pytest.raises(ValueError, match="at most 20,735 distinct problems exist"):  # refused before a draw
        generate(1_000_000, seed=0)
    with pytest.raises(ValueError, match="--numbers must be 2 to"):
        generate(5, count=9)


def test_question_keys_read_every_phrasing():
    r = generate(1, seed=5)[0]
    for kind in range(len(ALL_PHRASINGS)):
        q = ALL_PHRASINGS[kind].format(numbers="3, 4, 7 and 9", target=16)
        assert question_key(q) == problem_key({"numbers": [3, 4, 7, 9], "target": 16})
    assert question_key("What is 3 + 4?") is None
    assert question_key(r["question"]) == problem_key(r)


def test_variants_rewritten_and_harder():
    rows = generate(30, seed=4)
    rewritten = rewrite_rows(rows, seed=1)
    for old, new in zip(rows, rewritten):
        assert new["kind"] >= len(PHRASINGS) and (new["numbers"], new["target"]) == (old["numbers"], old["target"])
        assert new["question"] != old["question"]
    harder = harder_rows(rows, seed=1)
    for old, new in zip(rows, harder):
        assert len(new["numbers"]) == len(old["numbers"]) + 1 and new["numbers"][:-1] == old["numbers"]
        assert check_countdown(f"Final answer: {new['answer']}", new["numbers"], new["target"]).reward == 1.0
        assert len(worked_steps(new["answer"], new["numbers"])) >= 2  # needs at least three numbers
    names = [v.name for v in FAMILIES["countdown"].variants]
    assert names == ["rewritten", "harder"]


# (id, row, the field a problem names or None)
ROW_CASES = [
    ("a generated row", {"question": "q", "answer": "9 + 7", "numbers": N, "target": T}, None),
    ("no gold answer is fine", {"question": "q", "numbers": N, "target": T}, None),
    ("numbers not a list", {"question": "q", "numbers": "three", "target": T}, "numbers"),
    ("a number not whole", {"question": "q", "numbers": [3, 4.5], "target": T}, "numbers"),
    ("target not a number", {"question": "q", "numbers": N, "target": "sixteen"}, "target"),
    ("target with two signs", {"question": "q", "numbers": N, "target": "--5"}, "target"),  # was a traceback
    ("a number with two signs", {"question": "q", "numbers": "3 --4 7", "target": T}, "numbers"),
    ("a gold answer that misses", {"question": "q", "answer": "3 + 4", "numbers": N, "target": T}, "answer"),
    ("a gold answer that reuses", {"question": "q", "answer": "9 + 9", "numbers": N, "target": 18}, "answer"),
    ("operators not of + - * /", {"question": "q", "numbers": N, "target": T, "operators": "+^"}, "operators"),
    ("a gold answer dividing on a row of + - *", {"question": "q", "answer": "8 / 2", "numbers": [2, 2, 6, 8],
                                                  "target": 4, "operators": "+-*"}, "answer"),
]


@pytest.mark.parametrize("row, field", [c[1:] for c in ROW_CASES], ids=[c[0] for c in ROW_CASES])
def test_row_problems(row, field):
    problems = row_problems(row, "train.jsonl line 3", "answer")
    assert [p.where.rsplit(" ", 1)[-1] for p in problems] == ([] if field is None else [field])


def test_data_and_recipe_check_name_a_bad_target(tmp_path):
    # "target": "--5" ended `data check` and `recipe check` in a ValueError traceback (issue 67).
    rows = [{"question": f"Use 3 4 7 to make 16 ({i})", "numbers": [3, 4, 7], "target": 16} for i in range(3)]
    rows.append({"question": "Use 3 4 7 to make --5", "numbers": [3, 4, 7], "target": "--5"})
    data = tmp_path / "cd.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    check = subprocess.run([sys.executable, "-m", "grpokit", "data", "check", str(data), "--task", "countdown"],
                           capture_output=True, text=True)
    assert "Traceback" not in check.stderr + check.stdout
    assert "cd.jsonl:4 field target: '--5' is not a whole number" in check.stdout + check.stderr
    recipe = subprocess.run([sys.executable, "-m", "grpokit", "recipe", "check", "recipes/smollm2-countdown.yaml",
                             "--set", f"data.train={data}"], capture_output=True, text=True, cwd=REPO)
    assert recipe.returncode == 2 and "Traceback" not in recipe.stderr, recipe.stderr
    assert "cd.jsonl:4 field target: '--5' is not a whole number" in recipe.stderr


def test_generate_reaches_its_bound_and_refuses_past_it_at_once(tmp_path):
    # `--rows 20735`, the bound the generator advertised, drew for 210 s and refused after 10,623 rows (issue 67):
    # most multisets and targets have no expression. The bound is now the solvable problems themselves: exactly that
    # many rows come out (the last ones from the enumerated problems when random draws stop finding new ones), one
    # more is refused before any row is drawn, and nothing is written.
    settings = dict(count=2, low=1, high=6)
    pool = solvable_problems(2, 1, 6, "+-*", 2, 30, 3)
    rows = generate(len(pool), seed=3, **settings)
    assert len({problem_key(r) for r in rows}) == len(rows) == len(pool) == 42
    assert all(check_countdown(f"Final answer: {r['answer']}", r["numbers"], r["target"]).reward == 1.0 for r in rows)
    with pytest.raises(ValueError, match="42 distinct solvable problems exist"):
        generate(len(pool) + 1, **settings)
    excluded = {problem_key(r) for r in rows[:5]}
    assert len(generate(len(pool) - 5, exclude=excluded, **settings)) == 37
    with pytest.raises(ValueError, match="37 distinct solvable problems exist .* besides the excluded ones"):
        generate(len(pool) - 4, exclude=excluded, **settings)
    out = tmp_path / "cd.jsonl"
    cli = subprocess.run([sys.executable, "-m", "grpokit", "data", "generate", "countdown", str(out), "--rows", "43",
                          "--numbers", "2", "--high", "6"], capture_output=True, text=True)
    assert cli.returncode == 2 and "42 distinct solvable problems exist" in cli.stderr and not out.exists()


@pytest.mark.slow
def test_generate_refuses_the_advertised_bound_of_the_defaults_at_once():
    # Every 4-number multiset of 1-10 solved once (715 solves) rather than 10,000+ draws: refused before drawing.
    with pytest.raises(ValueError, match="10,722 distinct solvable problems exist"):
        generate(20_735)


def test_cli_generate_reports_and_refuses(tmp_path):
    out = tmp_path / "cd.jsonl"
    run = subprocess.run([sys.executable, "-m", "grpokit", "data", "generate", "countdown", str(out), "--rows", "20",
                          "--numbers", "3", "--operators", "+-"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "wrote 20 rows" in run.stdout and " s to generate" in run.stdout
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(len(r["numbers"]) == 3 and r["operators"] == "+-" for r in rows)
    bad = subprocess.run([sys.executable, "-m", "grpokit", "data", "generate", "countdown", str(tmp_path / "x.jsonl"),
                          "--operators", "+^"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--operators must be some of" in bad.stderr and "Traceback" not in bad.stderr
    foreign = subprocess.run([sys.executable, "-m", "grpokit", "data", "generate", "arithmetic",
                              str(tmp_path / "y.jsonl"), "--numbers", "4"], capture_output=True, text=True)
    assert foreign.returncode == 2 and "does not apply to arithmetic" in foreign.stderr
    assert not (tmp_path / "x.jsonl").exists() and not (tmp_path / "y.jsonl").exists()


def test_audit_finds_no_loophole_in_the_recipe():
    from grpokit.audit import audit_recipe
    from grpokit.recipe import load_recipe

    recipe = load_recipe(REPO / "recipes" / "smollm2-countdown.yaml")
    result = audit_recipe(recipe, 8)
    assert not result.flagged, [t.name for t in result.flagged]
    assert len(result.tricks) >= 10 and not result.right_not_preferred
    # the forbidden operator is tried on the recipe's rows (+ - *), and it would pay a reward blind to the column
    forbidden = next(t for t in result.tricks if t.name == "forbidden_operator")
    assert forbidden.rows >= 1 and forbidden.mean == 0.0
    assert "/" in forbidden.example  # a right value by division: what the reward paid 1.0 before it read the column
