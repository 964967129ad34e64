"""TRL's own tool-calling rollouts driven by a grpokit recipe with `env:`, on a tiny model (one step)."""
from __future__ import annotations

import json

import pytest
from conftest import REPO


@pytest.mark.parametrize("recipe,rewards", [
    ("smollm2-calculator-tools.yaml", ("task_success", "tool_choice", "tool_args", "tool_shaping")),
    ("smollm2-repofix.yaml", ("task_success", "tool_args")),   # task_success: hidden tests in the sandbox
])
def test_env_recipe_trains_one_step_through_trls_environment_factory(recipe, rewards, tiny_model_dir, tmp_path):
    from grpokit.recipe.load import load_recipe
    from grpokit.training.grpo import train

    r = load_recipe(REPO / "recipes" / recipe, [
        f"model.name={tiny_model_dir}", "model.gradient_checkpointing=false", "train.max_steps=1",
        "train.num_generations=2", "train.per_device_train_batch_size=2", "train.max_completion_length=16",
        "train.save_steps=100", f"output_dir={tmp_path / 'run'}"])
    summary = train(r).summary
    assert summary["status"] == "completed", summary
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    step = metrics[0]
    # TRL's tool metrics and one column per grpokit reward component
    assert {"tools/call_frequency", "tools/failure_frequency"} <= set(step)
    assert {f"rewards/{n}/mean" for n in rewards} <= set(step)
    assert summary["reward_errors"] == {n: 0 for n in rewards}
    if "repofix" in recipe:  # no edit by a random tiny model: the buggy project's hidden-test share, not 0 or 1
        assert 0 < step["rewards/task_success/mean"] < 1


def test_grpokit_eval_on_a_tool_recipe_reports_success_validity_and_calls(tiny_model_dir, tmp_path, capsys):
    from grpokit.cli import main

    recipe = tmp_path / "calc.yaml"  # the bundled recipe with short episodes: the tiny model only babbles
    recipe.write_text((REPO / "recipes" / "smollm2-calculator-tools.yaml").read_text()
                      .replace("max_completion_length: 96", "max_completion_length: 12"))
    code = main(["eval", str(tiny_model_dir), "--recipe", str(recipe),
                 "--max-rows", "2", "--samples", "2", "--output-dir", str(tmp_path / "ev")])
    assert code == 0
    doc = json.loads((tmp_path / "ev" / "eval" / "results-tools.json").read_text())
    e = doc["checkpoints"][0]
    assert doc["rows"] == 2 and e["episodes"] == 4 and 0.0 <= e["task_success"] <= 1.0
    assert e["calls_per_episode"] is not None and e["tool_failures"] is not None
    # The unsolved episodes are listed, each with its score: as many as task_success's mean leaves unsolved.
    assert len(e["failed"]) == round((1 - e["task_success"]) * e["episodes"])  # the calculator's is 0 or 1
    assert all({"question", "messages", "task_success"} <= set(f) for f in e["failed"])
    assert "task success" in capsys.readouterr().out


def test_tool_evaluation_scores_with_the_recipes_own_correctness_reward(tiny_model_dir, tmp_path, capsys):
    # An own reward is built as training builds it (grpokit.task.Task) and found by its role: task success is its
    # mean (0.25 on every episode: no built-in gives that), and every episode it did not give full marks is listed.
    import yaml

    from grpokit.cli import main

    raw = yaml.safe_load((REPO / "recipes" / "smollm2-calculator-tools.yaml").read_text())
    raw["train"]["max_completion_length"] = 12
    raw["rewards"] = [{"name": "reward_fns:partial_credit", "role": "correctness"}, {"name": "tool_args", "weight": 0.25}]
    recipe = tmp_path / "own.yaml"
    recipe.write_text(yaml.safe_dump(raw))
    assert main(["eval", str(tiny_model_dir), "--recipe", str(recipe), "--max-rows", "2",
                 "--output-dir", str(tmp_path / "ev")]) == 0
    e = json.loads((tmp_path / "ev" / "eval" / "results-tools.json").read_text())["checkpoints"][0]
    assert e["task_success"] == 0.25 and e["episodes"] == 2
    assert [f["task_success"] for f in e["failed"]] == [0.25, 0.25]
    assert "task success" in capsys.readouterr().out


def test_a_narrower_tool_evaluation_never_replaces_the_full_one(tiny_model_dir, tmp_path, capsys):
    # The re-test: on a tool run, `eval R --checkpoints best --max-rows 2` or `eval R --data other.jsonl` replaced
    # results-tools.json (other runs write results-partial.json / results-<stem>.json and keep the full file).
    from grpokit.cli import main
    from grpokit.data import load_datasets
    from grpokit.recipe.load import load_run_recipe

    recipe = tmp_path / "calc.yaml"
    recipe.write_text((REPO / "recipes" / "smollm2-calculator-tools.yaml").read_text()
                      .replace("max_completion_length: 96", "max_completion_length: 12"))
    run = tmp_path / "run"
    assert main(["train", str(recipe), "--output-dir", str(run), "--skip-audit", "--set", f"model.name={tiny_model_dir}",
                 "--set", "model.gradient_checkpointing=false", "--set", "train.max_steps=2", "--set",
                 "train.save_steps=1", "--set", "train.num_generations=2", "--set",
                 "train.per_device_train_batch_size=2"]) == 0
    assert main(["eval", str(run), "--max-rows", "3"]) == 0
    full, best = (run / "eval" / "results-tools.json").read_bytes(), (run / "eval" / "best.json").read_bytes()
    assert json.loads(full)["rows"] == 3 and len(json.loads(full)["checkpoints"]) == 3
    capsys.readouterr()
    assert main(["eval", str(run), "--checkpoints", "best", "--max-rows", "2"]) == 0
    out = capsys.readouterr().out
    assert "results-tools-partial.json" in out and "is narrower" in out, out
    partial = json.loads((run / "eval" / "results-tools-partial.json").read_text())
    assert partial["rows"] == 2 and len(partial["checkpoints"]) == 1
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps(r) + "\n" for r in load_datasets(load_run_recipe(run))[0][:2]))
    assert main(["eval", str(run), "--data", str(other)]) == 0
    assert json.loads((run / "eval" / "results-tools-other.json").read_text())["rows"] == 2
    assert (run / "eval" / "results-tools.json").read_bytes() == full
    assert (run / "eval" / "best.json").read_bytes() == best
