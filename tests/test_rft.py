"""`grpokit data mine-solutions` (grpokit.evaluation.rft): a model's own right solutions to a recipe's training rows,
kept only where the task's correctness reward scores them 1.0, each distinct one a row with a `solution`; and what it
refuses before any model loads."""
from __future__ import annotations

import json
import zlib

import pytest
from conftest import make_recipe

from grpokit.cli import main
from grpokit.evaluation import mine_solutions
from grpokit.evaluation.rft import distinct_right


def _right(text: str) -> bool:  # tests/reward_fns.py even_text
    return zlib.crc32(text.strip().encode()) % 2 == 0


# (id, the recipe's rewards, whether any solution can be right)
REWARDS = [
    ("an own pass/fail correctness reward: about half the samples pass",
     [{"name": "reward_fns:even_text", "role": "correctness"}], True),
    ("math_correctness: a tiny untrained model answers nothing right", [{"name": "math_correctness"}], False),
]


@pytest.mark.parametrize("rewards, any_right", [c[1:] for c in REWARDS], ids=[c[0] for c in REWARDS])
def test_only_distinct_right_samples_are_kept(tmp_path, tiny_model_dir, rewards, any_right):
    recipe = make_recipe(tmp_path, tiny_model_dir, rewards)
    out = tmp_path / "rft.jsonl"
    r = mine_solutions(tiny_model_dir, out, recipe, samples=2, log=lambda _: None)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert r["rows"] == 18 and r["samples"] == 2 and r["solutions"] == len(rows)  # 24 rows, a quarter held out
    assert r["rows_solved"] == len({row["question"] for row in rows})
    if not any_right:
        assert rows == [] and r["right_samples"] == 0
        return
    assert 0 < r["rows_solved"] < r["rows"] and r["solutions"] <= r["right_samples"] < r["rows"] * 2
    assert all(_right(row["solution"]) for row in rows)  # kept only when the correctness reward passed it
    by_question: dict[str, list[str]] = {}
    for row in rows:
        assert row["answer"] and row["solution"] == row["solution"].strip()  # the training row, its solution beside
        by_question.setdefault(row["question"], []).append(row["solution"])
    assert all(len(set(s)) == len(s) for s in by_question.values())  # each distinct solution once


def test_distinct_right_keeps_the_first_of_equal_texts():
    assert distinct_right(["a ", "b", "a", " ", "c"], [True, False, True, True, True]) == ["a", "c"]


def test_grpokit_sft_trains_on_the_solutions_as_written(tmp_path, tiny_model_dir):
    from grpokit.recipe import load_recipe
    from grpokit.training.sft import sft_dataset

    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "reward_fns:even_text", "role": "correctness"}])
    out = tmp_path / "rft.jsonl"
    mine_solutions(tiny_model_dir, out, recipe, samples=2, log=lambda _: None)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    data = sft_dataset(rows, load_recipe(recipe, [f"data.train={out}"]))
    assert [d["completion"] for d in data] == [r["solution"] for r in rows]


# (id, argv after `data mine-solutions`; {tmp}: the test's folder, the message)
REFUSED = [
    ("no run and no model folder", ["{tmp}/nothing", "--out", "{tmp}/o.jsonl"],
     "neither a grpokit run directory (config.yaml) nor a model folder (config.json)"),
    ("a model folder without a recipe", ["{model}", "--out", "{tmp}/o.jsonl"], "pass --recipe RECIPE.yaml"),
    ("no samples", ["{model}", "--recipe", "{recipe}", "--out", "{tmp}/o.jsonl", "--samples", "0"],
     "--samples: must be at least 1"),
    ("a recipe with nothing to judge by", ["{model}", "--recipe", "{format_only}", "--out", "{tmp}/o.jsonl"],
     "no correctness reward to judge solutions by"),
    ("the output over the rows it reads", ["{model}", "--recipe", "{recipe}", "--out", "{tmp}/train.jsonl",
                                           "--overwrite"], "read"),
]


@pytest.mark.parametrize("argv, message", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused_before_any_model_loads(tmp_path, tiny_model_dir, capsys, argv, message):
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "math_correctness"}])
    format_only = tmp_path / "f.yaml"
    format_only.write_text(recipe.read_text().replace("name: math_correctness", "name: format"))
    before = (tmp_path / "train.jsonl").read_text()
    args = [a.format(tmp=tmp_path, model=tiny_model_dir, recipe=recipe, format_only=format_only) for a in argv]
    assert main(["data", "mine-solutions", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "o.jsonl").exists() and (tmp_path / "train.jsonl").read_text() == before
