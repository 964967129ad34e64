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
from grpokit.errors import GrpokitError
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
    if not any_right:  # refused, and the file at --out kept: an empty one replaced it, and `grpokit sft` failed on it
        out.write_text('{"question": "mine", "solution": "kept"}\n')
        with pytest.raises(GrpokitError, match=r"no right solution: none of 36 samples .*rft.jsonl was left as it") \
                as e:
            mine_solutions(tiny_model_dir, out, recipe, samples=2, overwrite=True, log=lambda _: None)
        assert e.value.exit_code == 1 and out.read_text() == '{"question": "mine", "solution": "kept"}\n'
        return
    r = mine_solutions(tiny_model_dir, out, recipe, samples=2, log=lambda _: None)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert r["rows"] == 18 and r["samples"] == 2 and r["solutions"] == len(rows)  # 24 rows, a quarter held out
    assert r["rows_solved"] == len({row["question"] for row in rows})
    assert 0 < r["rows_solved"] < r["rows"] and r["solutions"] <= r["right_samples"] < r["rows"] * 2
    assert all(_right(row["solution"]) for row in rows)  # kept only when the correctness reward passed it
    by_question: dict[str, list[str]] = {}
    for row in rows:
        assert row["answer"] and row["solution"] == row["solution"].strip()  # the training row, its solution beside
        by_question.setdefault(row["question"], []).append(row["solution"])
    assert all(len(set(s)) == len(s) for s in by_question.values())  # each distinct solution once


def test_the_recipes_seed_draws_the_samples(tmp_path, tiny_model_dir):
    """A second seed of an RFT arm mines other samples (train.seed, as GRPO draws with it); one seed, the same."""
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "reward_fns:even_text", "role": "correctness"}])

    def mined(name, seed):
        mine_solutions(tiny_model_dir, tmp_path / name, recipe, samples=2, overrides=[f"train.seed={seed}"],
                       log=lambda _: None)
        return (tmp_path / name).read_text()

    assert mined("a.jsonl", 0) == mined("b.jsonl", 0) != mined("c.jsonl", 1)


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


# (id, argv after `data mine-solutions`; {tmp}: the test's folder, the exit code, what the message says)
REFUSED = [
    ("no run and no model folder", ["{tmp}/nothing", "--out", "{tmp}/o.jsonl"], 2,
     "neither a grpokit run directory (config.yaml) nor a model folder (config.json)"),
    ("a model folder without a recipe", ["{model}", "--out", "{tmp}/o.jsonl"], 2, "pass --recipe RECIPE.yaml"),
    ("no samples", ["{model}", "--recipe", "{recipe}", "--out", "{tmp}/o.jsonl", "--samples", "0"], 2,
     "--samples: must be 1 to 1024"),
    # accepted, it sampled for ever
    ("samples without end", ["{model}", "--recipe", "{recipe}", "--out", "{tmp}/o.jsonl", "--samples", "99999999"], 2,
     "--samples: must be 1 to 1024, got 99999999"),
    ("no rows", ["{model}", "--recipe", "{recipe}", "--out", "{tmp}/o.jsonl", "--max-rows", "0"], 2,
     "--max-rows: must be at least 1"),
    ("a recipe with nothing to judge by", ["{model}", "--recipe", "{format_only}", "--out", "{tmp}/o.jsonl"], 2,
     "no correctness reward to judge solutions by"),
    ("a recipe file that is not there", ["{model}", "--recipe", "{tmp}/none.yaml", "--out", "{tmp}/o.jsonl"], 2,
     "none.yaml: recipe file not found"),
    ("a --set key the recipe has not", ["{model}", "--recipe", "{recipe}", "--set", "train.temprature=1.0", "--out",
                                        "{tmp}/o.jsonl"], 2, "--set train.temprature: unknown key"),
    ("the output over the rows it reads", ["{model}", "--recipe", "{recipe}", "--out", "{tmp}/train.jsonl",
                                           "--overwrite"], 2, "read"),
    ("an output that exists, without --overwrite", ["{model}", "--recipe", "{recipe}", "--out", "{tmp}/old.jsonl"], 2,
     "old.jsonl: already exists"),
    # training rows with a broken line: the file and line, before the model loads (exit 1: unusable data, as
    # `grpokit data check` says it)
    ("a training row that is not JSON", ["{model}", "--recipe", "{recipe}", "--set", "data.train={tmp}/bad.jsonl",
                                         "--out", "{tmp}/o.jsonl"], 1, "bad.jsonl:2: invalid JSON"),
]


@pytest.mark.parametrize("argv, code, message", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_refused_before_any_model_loads(tmp_path, tiny_model_dir, capsys, argv, code, message):
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "math_correctness"}])
    format_only = tmp_path / "f.yaml"
    format_only.write_text(recipe.read_text().replace("name: math_correctness", "name: format"))
    (tmp_path / "old.jsonl").write_text("mine\n")
    (tmp_path / "bad.jsonl").write_text('{"question": "What is 2 + 2?", "answer": "4"}\n{"question": "What is 3\n')
    before = (tmp_path / "train.jsonl").read_text()
    args = [a.format(tmp=tmp_path, model=tiny_model_dir, recipe=recipe, format_only=format_only) for a in argv]
    assert main(["data", "mine-solutions", *args]) == code
    err = capsys.readouterr().err
    assert message in err and "fix:" in err and "Traceback" not in err
    assert not (tmp_path / "o.jsonl").exists() and (tmp_path / "train.jsonl").read_text() == before
    assert (tmp_path / "old.jsonl").read_text() == "mine\n"


def test_the_rows_a_recipe_names_relative_to_its_folder_are_never_written_over(tmp_path, tiny_model_dir, capsys,
                                                                              monkeypatch):
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "math_correctness"}])
    recipe.write_text(recipe.read_text().replace(str(tmp_path / "train.jsonl"), "train.jsonl"))  # the recipe's folder
    before = (tmp_path / "train.jsonl").read_text()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert main(["data", "mine-solutions", str(tiny_model_dir), "--recipe", str(recipe), "--out",
                 str(tmp_path / "train.jsonl"), "--overwrite"]) == 2
    err = capsys.readouterr().err
    assert "train.jsonl: is a file this command reads" in err and "fix:" in err
    assert (tmp_path / "train.jsonl").read_text() == before


def test_a_runs_own_recipe_and_checkpoint(tmp_path, tiny_model_dir, capsys):
    # A run folder: its own recipe gives the rows and the judge, its last checkpoint the model; the command says
    # what it kept and the `grpokit sft` that trains on it.
    recipe = make_recipe(tmp_path, tiny_model_dir, [{"name": "reward_fns:even_text", "role": "correctness"}],
                         max_steps=1)
    run = tmp_path / "run"
    assert main(["sft", str(recipe), "--output-dir", str(run)]) == 0
    out = tmp_path / "rft.jsonl"
    assert main(["data", "mine-solutions", str(run), "--out", str(out), "--samples", "2", "--max-rows", "5"]) == 0
    said = capsys.readouterr().out
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert f"wrote {len(rows)} distinct right solutions to {out}: " in said and " of 5 rows kept at least one" in said
    assert f"next: grpokit sft RECIPE --set data.train={out} --init-from {run}" in said
    assert all(_right(row["solution"]) for row in rows)
    assert main(["data", "mine-solutions", str(run), "--out", str(tmp_path / "o.jsonl"), "--checkpoint", "7"]) == 2
    err = capsys.readouterr().err
    assert "run: no complete checkpoint at step 7" in err and "fix: complete checkpoints: checkpoint-1" in err
    assert not (tmp_path / "o.jsonl").exists()
