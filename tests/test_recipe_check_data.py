"""`recipe check` means it (issue 35 item 1): the data checks training runs, and the own rewards on every row.

A user's unit-conversion data (`problem, target, unit`) with the recipe left at `question_field: question` used
to be "valid" with a note, then `train` refused with 40 identical errors; an own reward raising `KeyError` on one
row passed the 4-row trial and killed training at step 3. Each is now an exit-2 error of `recipe check` (and of
`train`, which loads the recipe the same way), with where, what and the fix.
"""
from __future__ import annotations

import pytest
import yaml
from conftest import write_jsonl

from grpokit.cli import main

REWARDS = '''
FACTORS = {"cm": 100, "mm": 1000}


def unit_match(completions, target, unit, **kwargs):
    return [1.0 if c.endswith(str(t)) else 0.0 * FACTORS[u] for c, t, u in zip(completions, target, unit)]
'''


@pytest.fixture()
def folder(tmp_path, monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "unit_rewards", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "unit_rewards.py").write_text(REWARDS)
    rows = [{"problem": f"{i} m in cm?", "target": str(i * 100), "unit": "cm"} for i in range(40)]
    write_jsonl(tmp_path / "units.jsonl", rows)
    yield tmp_path
    sys.modules.pop("unit_rewards", None)


def _recipe(folder, data=None, train=None, rewards=None):
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump({
        "model": {"name": "default"},
        "data": {"train": "units.jsonl", "template": "plain_en", "question_field": "problem",
                 "answer_field": "target", **(data or {})},
        "rewards": rewards or [{"name": "unit_rewards:unit_match"}],
        "train": {"num_generations": 4, "per_device_train_batch_size": 4, **(train or {})}}))
    return path


def _check(path, capsys) -> tuple[int, str]:
    code = main(["recipe", "check", str(path)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def test_a_wrong_question_field_fails_naming_the_field_the_columns_and_the_closest(folder, capsys):
    code, err = _check(_recipe(folder, data={"question_field": "question"}), capsys)
    assert code == 2 and "valid" not in err.splitlines()[-1]
    assert ("data.train: units.jsonl: 40 rows (lines 1, 2, 3, ...): missing question (looked for question; the row "
            "has: problem, target, unit)") in err
    assert "fix: did you mean 'problem'? name it: data.question_field: problem in a recipe" in err
    assert err.count("missing question") == 1  # one grouped line, not 40


def test_a_misspelt_field_gets_its_did_you_mean(folder, capsys):
    code, err = _check(_recipe(folder, data={"answer_field": "trget"}), capsys)
    assert code == 2 and "missing answer (looked for trget;" in err and "did you mean 'target'?" in err


def test_fewer_rows_than_one_step_needs_fail(folder, capsys):
    code, err = _check(_recipe(folder, train={"per_device_train_batch_size": 256}), capsys)
    assert code == 2
    assert ("data.train: 36 usable row(s) to train on (40 usable, 4 held out for eval by data.eval_fraction 0.1), "
            "fewer than one step needs: 64 prompts (per_device_train_batch_size 256 x gradient_accumulation_steps 1 "
            "/ num_generations 4, on one process") in err
    assert "fix: add rows, or lower train.per_device_train_batch_size" in err


def test_the_step_counts_trls_generation_batch(folder, capsys):
    path = _recipe(folder, data={"eval_fraction": 0.0})
    raw = yaml.safe_load(path.read_text())
    raw["trl"] = {"generation_batch_size": 200}
    path.write_text(yaml.safe_dump(raw))
    code, err = _check(path, capsys)
    assert code == 2 and "fewer than one step needs: 50 prompts (trl.generation_batch_size 200 / num_generations 4" in err


def test_an_unusable_eval_file_fails_at_data_eval(folder, capsys):
    write_jsonl(folder / "held.jsonl", [{"question": "1 m in cm?"}, {"question": "2 m in cm?"}])
    code, err = _check(_recipe(folder, data={"eval": "held.jsonl"}), capsys)
    assert code == 2 and "data.eval: held.jsonl: 2 rows (lines 1, 2): missing question" in err


def test_the_recipe_passes_when_the_fields_are_right(folder, capsys):
    code, err = _check(_recipe(folder), capsys)
    assert code == 0 and err.splitlines()[-1].endswith("valid")


def test_an_own_reward_that_raises_on_one_row_of_forty_is_an_error_with_the_row_and_the_line(folder, capsys):
    rows = [{"problem": f"{i} m in cm?", "target": str(i * 100), "unit": "cm" if i != 23 else "in"} for i in range(40)]
    write_jsonl(folder / "units.jsonl", rows)
    code, err = _check(_recipe(folder), capsys)
    assert code == 2
    line = next(i for i, t in enumerate(REWARDS.splitlines(), 1) if "FACTORS[u]" in t)
    assert (f"rewards.0.name: unit_match() raised KeyError: 'in' (unit_rewards.py:{line}, in <listcomp>), on "
            "units.jsonl:24 (question '23 m in cm?', answer '2300'; columns: ") in err


def test_train_refuses_it_the_same_way(folder):
    from grpokit.errors import GrpokitError
    from grpokit.recipe import load_recipe

    write_jsonl(folder / "units.jsonl", [{"problem": f"{i} m?", "target": str(i), "unit": "cm" if i != 30 else "in"}
                                         for i in range(40)])
    with pytest.raises(GrpokitError, match=r"raised KeyError: 'in'.*on units.jsonl:31 \("):
        load_recipe(_recipe(folder), use="train")
    load_recipe(_recipe(folder))  # eval, export, report: the rows are not read again for them


def test_a_set_too_big_for_the_budget_is_sampled_with_a_note(folder, capsys, monkeypatch):
    import grpokit.recipe.own_reward_check as check

    monkeypatch.setattr(check, "OWN_SWEEP_BUDGET_S", 0.0)
    code, err = _check(_recipe(folder), capsys)
    assert code == 0
    assert ("rewards.0 (unit_rewards:unit_match): called on 4 of 40 rows of data.train in 0 s (a random sample; "
            "training calls it on the rest)") in err


def test_a_row_of_the_trial_call_is_named_too(folder, capsys):
    write_jsonl(folder / "units.jsonl", [{"problem": f"{i} m?", "target": str(i), "unit": "cm" if i != 2 else "in"}
                                         for i in range(40)])
    code, err = _check(_recipe(folder), capsys)
    assert code == 2 and "raised KeyError: 'in'" in err and "on units.jsonl:3 (question '2 m?'" in err


def test_a_training_run_that_fails_on_an_own_reward_keeps_the_users_line_in_run_json(tmp_path, tiny_model_dir,
                                                                                     monkeypatch, capsys):
    """Issue 35 item 1 (b), end to end: the reward raises in training (here: once a flag file exists, so the
    recipe check passes); run.json's error.traceback goes on into the user's file, to the line."""
    import json

    from conftest import addition_recipe

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "late_rewards", raising=False)
    flag = tmp_path / "boom"
    (tmp_path / "late_rewards.py").write_text(
        "from pathlib import Path\n"
        "\n"
        "\n"
        "def late(completions, answer, **kwargs):\n"
        f"    if Path({str(flag)!r}).exists():\n"
        "        return [float({}[a]) for a in answer]  # KeyError in training\n"
        "    return [0.0 for _ in completions]\n")
    recipe = addition_recipe(tmp_path, tiny_model_dir, rewards=[{"name": "late_rewards:late"}],
                             data={"eval_fraction": 0.0}, train={
                                 "num_generations": 2, "per_device_train_batch_size": 2, "max_completion_length": 4,
                                 "max_steps": 1, "save_steps": 1, "logging_steps": 1})
    from grpokit.recipe import load_recipe
    from grpokit.training import train

    loaded = load_recipe(recipe, use="train")  # the check passes: the flag is not there yet
    flag.write_text("")
    run = tmp_path / "run"
    with pytest.raises(Exception, match="raised on every completion of the batch"):
        train(loaded, run_dir=run)
    error = json.loads((run / "run.json").read_text())["error"]
    assert "KeyError" in error["message"] and "(late_rewards.py:6, in <listcomp>)" in error["message"]
    assert 'late_rewards.py", line 6, in ' in error["traceback"]
