"""Your own reward is checked as the built-ins are, before any model loads (issue 27, item 1).

Real bad functions, each in a module a recipe names, through `grpokit recipe check`: a misspelt param
swallowed by **kwargs, an exception on real rows, a scalar, a wrong length, strings, nan and inf, a required
parameter no column fills, a training-only TRL argument without a default, a positional-only signature.
Then `grpokit rewards score` on module:fn and FILE.py:fn, and the names in `recipe check` and the report.
"""
from __future__ import annotations

import json

import pytest
import yaml
from conftest import write_jsonl

from grpokit.cli import main

FUNCTIONS = '''
import math


def no_kwargs(completions):
    return [1.0 if c else 0.0 for c in completions]


def with_limit(completions, answer, limit=100, **kwargs):
    return [1.0 if len(c) < limit and c.endswith(str(a)) else 0.0 for c, a in zip(completions, answer)]


def splits(prompts, completions, **kwargs):
    return [float(c.split(":")[1]) for c in completions]


def scalar(completions, **kwargs):
    return 1.0


def one_score(completions, **kwargs):
    return [1.0]


def strings(completions, **kwargs):
    return ["1" for _ in completions]


def nans(completions, **kwargs):
    return [math.nan for _ in completions]


def infs(completions, **kwargs):
    return [math.inf if not c else 0.0 for c in completions]


def needs_gold(completions, gold):
    return [0.0 for _ in completions]


def needs_state(completions, trainer_state):
    return [float(trainer_state.global_step) for _ in completions]


def positional(completions, /):
    return [0.0 for _ in completions]


def kwarg_named_answer(completions, answer=None, **kwargs):
    return [0.0 for _ in completions]


def seen(prompts, completions, completion_ids, answer, trainer_state=None, log_metric=None, **kwargs):
    """Records what TRL's arguments looked like."""
    SEEN.update(prompts=prompts, completions=completions, ids=completion_ids, answer=answer,
                state=trainer_state, columns=sorted(kwargs))
    return [0.0 for _ in completions]


SEEN = {}
'''


@pytest.fixture()
def folder(tmp_path, monkeypatch):
    import sys

    monkeypatch.delitem(sys.modules, "my_rewards", raising=False)  # another test's module of that name
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "my_rewards.py").write_text(FUNCTIONS)
    write_jsonl(tmp_path / "train.jsonl", [{"question": f"{i} + 1 = ?", "answer": str(i + 1), "level": i}
                                           for i in range(6)])
    yield tmp_path
    import sys

    sys.modules.pop("my_rewards", None)  # each test imports the module afresh


def _recipe(folder, entry, data="train.jsonl"):
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump({"data": {"train": data, "eval_fraction": 0.0, "template": "plain_en"},
                                    "rewards": [entry]}))
    return path


BAD = [
    # (id, reward entry, where, what, fix)
    ("misspelt param swallowed by **kwargs", {"name": "my_rewards:with_limit", "params": {"limt": 150}},
     "rewards.0.params.limt", "with_limit() has no parameter 'limt' (it takes **kwargs", "did you mean 'limit'?"),
    ("raises on real rows, with its line", {"name": "my_rewards:splits"}, "rewards.0.name",
     "splits() raised IndexError: list index out of range (my_rewards.py:", "for any completion text"),
    ("returns a scalar", {"name": "my_rewards:scalar"}, "rewards.0.name", "scalar() returned float 1.0, not a list",
     "return a list"),
    ("wrong length", {"name": "my_rewards:one_score"}, "rewards.0.name", "returned 1 score(s) for 8 completions",
     "exactly one score per completion"),
    ("strings", {"name": "my_rewards:strings"}, "rewards.0.name", "returned str '1' for completion 0, not a number",
     "return a float"),
    ("nan", {"name": "my_rewards:nans"}, "rewards.0.name", "nans() returned nan for completion 0", "finite number"),
    ("inf on the empty completion", {"path": "my_rewards.py", "function": "infs"}, "rewards.0.path",
     "infs() returned inf for completion 1 ('')", "finite number"),
    ("a required parameter no column fills", {"name": "my_rewards:needs_gold"}, "rewards.0.name",
     "needs_gold() requires `gold`, which is neither a dataset column (the rows have: answer, level, question)",
     "give it a default"),
    ("a training-only TRL argument without a default", {"name": "my_rewards:needs_state"}, "rewards.0.name",
     "requires `trainer_state`, which TRL passes in training only", "trainer_state=None"),
    ("positional-only", {"name": "my_rewards:positional"}, "rewards.0.name", "takes `completions` positionally only",
     "remove the `/`"),
    ("a param that shadows a column", {"name": "my_rewards:kwarg_named_answer", "params": {"answer": "7"}},
     "rewards.0.params.answer", "param 'answer' would replace a dataset column", "rename the parameter"),
]


@pytest.mark.parametrize("entry, where, what, fix", [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_recipe_check_reports_a_bad_own_reward_before_any_model_loads(folder, capsys, entry, where, what, fix):
    assert main(["recipe", "check", str(_recipe(folder, entry))]) == 2
    err = capsys.readouterr().err
    assert f"{where}: " in err and what in err and "fix: " in err and fix in err, err
    assert "Traceback" not in err


def test_a_function_without_kwargs_gets_only_what_it_names(folder, capsys):
    # `def no_kwargs(completions)` used to pass every check and fail at step 0 (prompts= was always passed).
    assert main(["recipe", "check", str(_recipe(folder, {"name": "my_rewards:no_kwargs"}))]) == 0
    from grpokit.recipe import load_recipe
    from grpokit.task import Task

    fn = Task.from_recipe(load_recipe(_recipe(folder, {"name": "my_rewards:no_kwargs"}))).rewards[0].fn
    # called exactly as TRL 1.16's _calculate_rewards calls a reward function
    assert fn(prompts=["p", "p"], completions=["a", ""], completion_ids=[[1], []], answer=["1", "1"],
              trainer_state=object(), log_extra=lambda *a: None, log_metric=lambda *a: None) == [1.0, 0.0]


def test_the_trial_call_passes_trls_real_arguments(folder):
    import my_rewards

    from grpokit.recipe import load_recipe

    load_recipe(_recipe(folder, {"name": "my_rewards:seen"}))
    seen = my_rewards.SEEN
    assert len(seen["completions"]) == 8 and seen["completions"][:2] == ["Final answer: 1", ""]  # 4 rows x 2
    assert seen["answer"][:2] == ["1", "1"] and seen["columns"] == ["level", "log_extra", "question"]  # all of them
    assert all(isinstance(i, list) and all(isinstance(t, int) for t in i) for i in seen["ids"])
    assert seen["state"].global_step == 0 and "### Question\n0 + 1 = ?" in seen["prompts"][0]  # plain_en


def test_a_hub_dataset_notes_that_the_reward_was_not_called(folder, capsys):
    path = _recipe(folder, {"name": "my_rewards:no_kwargs"}, data="hf:openai/gsm8k")
    assert main(["recipe", "check", str(path)]) == 0
    err = capsys.readouterr().err
    assert "rewards.0 (my_rewards:no_kwargs): not called on rows before training" in err
    assert "grpokit rewards score --reward my_rewards:no_kwargs" in err


SCORE = [
    # (id, --reward, extra args, exit code, in stdout or stderr)
    ("module:function", "my_rewards:with_limit", [], 0, '{"reward": 1.0}'),
    ("file.py:function", "{folder}/my_rewards.py:with_limit", ["--param", "limit=3"], 0, '{"reward": 0.0}'),
    ("a misspelt --param", "my_rewards:with_limit", ["--param", "limt=3"], 2, "did you mean 'limit'?"),
    ("a column the rows lack", "my_rewards:needs_gold", [], 2, "row has no 'gold' column(s), which the reward reads"),
    ("raising rows are reported, not zeroed", "my_rewards:splits", [], 1, '"error": "IndexError'),
    ("an unknown built-in still lists the rewards", "nosuch", [], 2, "your own function as module:function"),
]


@pytest.mark.parametrize("reward, extra, code, expected", [c[1:] for c in SCORE], ids=[c[0] for c in SCORE])
def test_rewards_score_takes_your_own_function(folder, monkeypatch, capsys, reward, extra, code, expected):
    monkeypatch.chdir(folder)
    rows = write_jsonl(folder / "rows.jsonl", [{"completion": "so 12", "answer": "12"},
                                               {"completion": "Final answer: 3", "answer": "4"}])
    argv = ["rewards", "score", "--reward", reward.format(folder=folder), "--input", str(rows), *extra]
    assert main(argv) == code
    out = capsys.readouterr()
    assert expected in out.out + out.err and "Traceback" not in out.err


def test_recipe_check_names_own_rewards_by_module_and_function(folder, capsys):
    path = folder / "recipe.yaml"
    path.write_text(yaml.safe_dump({"data": {"train": "train.jsonl", "eval_fraction": 0.0, "template": "plain_en"},
                                    "rewards": [{"path": "my_rewards.py", "function": "no_kwargs"},
                                                {"name": "my_rewards.with_limit", "role": "shaping", "weight": 0.5},
                                                {"name": "format", "weight": 0.2}]}))
    assert main(["recipe", "check", str(path)]) == 0
    out = capsys.readouterr()
    assert ("rewards: my_rewards.py:no_kwargs (own, correctness) x1, my_rewards:with_limit (own, shaping) x0.5, "
            "format (format) x0.2") in out.err
    printed = yaml.safe_load(out.out)
    assert printed["rewards"][0] == {"path": "my_rewards.py", "function": "no_kwargs", "weight": 1.0, "params": {}}
    assert "name: null" not in out.out


def test_the_report_header_names_own_rewards(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(yaml.safe_dump({"model": {"name": "default"}, "rewards": [
        {"name": None, "path": "/somewhere/my_rewards.py", "function": "dollar_answer", "weight": 1.0},
        {"name": "format", "weight": 0.2}]}))
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward": 0.5}) + "\n")
    assert main(["report", str(run)]) == 0
    page = (run / "report" / "report.html").read_text(encoding="utf-8")
    assert "my_rewards.py:dollar_answer ×1.0, format ×0.2" in page and "None ×" not in page
