"""Recipe validation: each bad input gives its message, with field path, line and fix; no model loads."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from grpokit.cli import main
from grpokit.config import load_recipe
from grpokit.errors import GrpokitError

REPO = Path(__file__).resolve().parents[1]
GOOD = {
    "model": {"name": "default"},
    "data": {"train": "builtin:arithmetic/train.jsonl", "template": "chat"},
    "rewards": [{"name": "math_correctness", "weight": 1.0}],
    "train": {"num_generations": 4, "per_device_train_batch_size": 8},
}


def write(tmp_path: Path, recipe: dict | str) -> Path:
    p = tmp_path / "recipe.yaml"
    p.write_text(recipe if isinstance(recipe, str) else yaml.safe_dump(recipe, sort_keys=False))
    return p


def patch(update: dict) -> dict:
    out = yaml.safe_load(yaml.safe_dump(GOOD))
    for dotted, value in update.items():
        node = out
        *path, last = dotted.split(".")
        for k in path:
            node = node[int(k)] if isinstance(node, list) else node.setdefault(k, {})
        node[last] = value
    return out


CASES = [
    # (id, change to the good recipe, substrings expected in the report)
    ("typo in a train key", {"train.learnig_rate": 1e-5}, ["train.learnig_rate", "unknown key", "did you mean 'learning_rate'"]),
    ("typo in a section", {"modle": {"name": "x"}}, ["modle", "unknown key", "did you mean 'model'"]),
    ("wrong type", {"train.learning_rate": "fast"}, ["train.learning_rate", "fast", "right type"]),
    ("num_generations < 2", {"train.num_generations": 1}, ["train.num_generations", ">= 2"]),
    ("learning_rate <= 0", {"train.learning_rate": 0}, ["train.learning_rate", "> 0"]),
    ("temperature <= 0", {"train.temperature": 0}, ["train.temperature", "> 0"]),
    ("eval_fraction >= 1", {"data.eval_fraction": 1.5}, ["data.eval_fraction", "< 1"]),
    ("unknown template", {"data.template": "alpaca"}, ["data.template", "plain_zh", "chat"]),
    ("generation batch not divisible", {"train.num_generations": 3},
     ["train.num_generations", "not divisible", "multiple of 3"]),
    ("unknown reward lists the valid ones", {"rewards": [{"name": "math_corectness"}]},
     ["rewards.0.name", "unknown reward", "did you mean 'math_correctness'", "format"]),
    ("unknown reward param", {"rewards": [{"name": "format", "params": {"min_lines": 2}}]},
     ["rewards.0.params.min_lines", "no parameter", "min_reasoning_lines"]),
    ("missing train file", {"data.train": "nope.jsonl"}, ["data.train", "file not found", "nope.jsonl"]),
    ("missing rewards", {"rewards": []}, ["rewards", "at least 1"]),
    ("thinking without chat", {"data.template": "plain_en", "model.enable_thinking": True},
     ["model.enable_thinking", "chat template"]),
    ("all weights zero", {"rewards": [{"name": "format", "weight": 0}]}, ["every reward weight is 0"]),
]


@pytest.mark.parametrize("update,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_recipe_reports_field_and_fix(tmp_path, update, expected):
    with pytest.raises(GrpokitError) as exc:
        load_recipe(write(tmp_path, patch(update)))
    text = exc.value.render()
    for s in expected:
        assert s in text, f"{s!r} missing from:\n{text}"
    assert exc.value.exit_code == 2


def test_every_problem_is_reported_at_once_with_line_numbers(tmp_path):
    # A type error, a typo, an unknown reward and a missing file in one recipe: four problems, one report.
    text = (
        "model:\n  name: default\n"
        "data:\n  train: missing.jsonl\n"
        "rewards:\n  - name: nope\n"
        "train:\n  learning_rate: abc\n  num_genrations: 4\n"
    )
    with pytest.raises(GrpokitError) as exc:
        load_recipe(write(tmp_path, text))
    wheres = [p.where for p in exc.value.problems]
    assert any("recipe.yaml:8 train.learning_rate" in w for w in wheres), wheres
    assert any("recipe.yaml:9 train.num_genrations" in w for w in wheres), wheres
    assert any("recipe.yaml:6 rewards.0.name" in w for w in wheres), wheres
    assert any("recipe.yaml:4 data.train" in w for w in wheres), wheres


def test_set_overrides_are_typed_and_validated(tmp_path):
    path = write(tmp_path, GOOD)
    r = load_recipe(path, ["train.learning_rate=2e-5", "train.max_steps=3", "model.lora.r=8"])
    assert r.train.learning_rate == 2e-5 and r.train.max_steps == 3 and r.model.lora.r == 8
    with pytest.raises(GrpokitError, match="train.num_generations"):
        load_recipe(path, ["train.num_generations=0"])


def test_relative_data_paths_resolve_from_the_recipe_folder(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "t.jsonl").write_text('{"question": "q", "answer": "1"}\n')
    r = load_recipe(write(tmp_path, patch({"data.train": "d/t.jsonl"})))
    assert r.resolve_data_path(r.data.train) == str(tmp_path / "d" / "t.jsonl")


def test_cli_prints_problems_without_traceback(tmp_path, capsys):
    path = write(tmp_path, patch({"train.num_generations": 1, "rewards": [{"name": "bogus"}]}))
    code = main(["recipe", "check", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    assert "train.num_generations" in err and "bogus" in err and "fix:" in err


def test_invalid_yaml_names_the_line(tmp_path):
    with pytest.raises(GrpokitError) as exc:
        load_recipe(write(tmp_path, "model:\n  name: [unclosed\ndata: {}\n"))
    assert "recipe.yaml:" in exc.value.problems[0].where and "YAML" in exc.value.problems[0].message


# Recipes whose data is made by a grpokit command first (the README says so): the command to run.
RECIPE_DATA_SETUP = {"smollm2-humaneval.yaml": ["data", "import", "humaneval", "{data}/humaneval.jsonl"]}


@pytest.mark.parametrize("path", sorted((REPO / "recipes").glob("*.yaml")), ids=lambda p: p.name)
def test_bundled_recipes_validate(path, tmp_path):
    # The Qwen3 recipes load GSM8K from the hub; validation itself needs no network.
    if path.name in RECIPE_DATA_SETUP:
        # Lay the recipe out as in the repo (recipes/ next to data/) and make its data the documented way.
        (tmp_path / "recipes").mkdir()
        path = Path(shutil.copy(path, tmp_path / "recipes" / path.name))
        data = tmp_path / "data"
        assert main([a.format(data=data) for a in RECIPE_DATA_SETUP[path.name]]) == 0
    recipe = load_recipe(path)
    assert recipe.rewards


def test_seed_table_recipe_values():
    r = load_recipe(REPO / "recipes" / "qwen3-0.6b-base-gsm8k.yaml")
    t = r.train
    assert (r.data.template, t.learning_rate, t.beta, t.num_generations, t.max_completion_length) == (
        "plain_en", 3e-6, 0.04, 8, 1024)
    assert (t.lr_scheduler_type, t.warmup_ratio, t.per_device_train_batch_size, t.gradient_accumulation_steps) == (
        "cosine", 0.03, 2, 8)
    r4 = load_recipe(REPO / "recipes" / "qwen3-4b-gsm8k-lora.yaml")
    assert r4.model.lora and r4.model.enable_thinking is True and r4.train.learning_rate == 2e-6
    assert (r4.train.beta, r4.train.temperature, r4.train.max_completion_length) == (0.01, 0.9, 2048)
