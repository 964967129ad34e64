"""SFT, compare, --init-from, mine-failures and GRPO with a learned reward, on tiny real models."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml
from conftest import REPO, write_jsonl
from safetensors.torch import load_file

from grpokit.cli import main
from grpokit.families.math import generate
from grpokit.health.learning import detect_reward_hacking
from grpokit.health.findings import Context
from grpokit.recipe.health_section import HealthConfig
from grpokit.run.checkpoints import COMPLETE_MARKER
from grpokit.run.rundir import RunDir
from grpokit.training.sft import reference_completion

TINY_TRAIN = {"learning_rate": 1e-3, "num_generations": 2, "per_device_train_batch_size": 4,
              "max_completion_length": 8, "max_steps": 2, "save_steps": 2, "logging_steps": 1, "temperature": 1.0,
              "num_samples_logged": 2}


def _recipe(tmp_path: Path, model_dir: Path, name: str = "recipe.yaml", **train) -> Path:
    data = tmp_path / "train.jsonl"
    if not data.exists():
        write_jsonl(data, generate(24, seed=7))
        write_jsonl(tmp_path / "eval.jsonl", generate(4, seed=8))
    recipe = {"model": {"name": str(model_dir)},
              "data": {"train": str(data), "eval": str(tmp_path / "eval.jsonl"), "template": "plain_en"},
              "rewards": [{"name": "math_correctness"}, {"name": "format", "weight": 0.5}],
              "train": {**TINY_TRAIN, **train}}
    (tmp_path / name).write_text(yaml.safe_dump(recipe))
    return tmp_path / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model_dir):
    """An SFT run and a GRPO run of the tiny model on the same rows, both evaluated (`grpokit eval`)."""
    tmp = tmp_path_factory.mktemp("runs")
    recipe = _recipe(tmp, tiny_model_dir)
    sft, grpo = tmp / "sft", tmp / "grpo"
    # save_steps beyond max_steps: the final weights are saved as a checkpoint all the same
    assert main(["sft", str(recipe), "--output-dir", str(sft), "--set", "train.save_steps=5"]) == 0
    assert main(["train", str(recipe), "--output-dir", str(grpo), "--skip-audit"]) == 0
    for run in (sft, grpo):
        assert main(["eval", str(run), "--max-new-tokens", "8"]) == 0
    return {"dir": tmp, "recipe": recipe, "sft": sft, "grpo": grpo}


REFERENCES = [
    # (row, marker, family, the completion SFT is taught)
    ({"question": "q", "answer": "7", "solution": "3 + 4 = 7\nFinal answer: 7"}, "Final answer:", "math",
     "3 + 4 = 7\nFinal answer: 7"),                                                  # a solution column wins
    ({"question": "q", "answer": "Half of 48 is <<48/2=24>>24.\nSo 24 + 48 = <<24+48=72>>72.\n#### 72"},
     "Final answer:", "math", "Half of 48 is 24.\nSo 24 + 48 = 72.\nFinal answer: 72"),  # GSM8K: annotations dropped
    ({"question": "q", "answer": "9", "a": 18, "b": 9, "op": "-"}, "Final answer:", "math",
     "18 - 9 = 9\nFinal answer: 9"),                                                 # generated arithmetic row
    ({"question": "q", "answer": "5"}, "最终答案：", "math", "最终答案：5"),        # answer only, full-width colon
    ({"question": "q", "answer": "9", "a": 18, "b": 9, "op": "-"}, "Final answer:", None,
     "Final answer: 9"),                                                              # no family: the line alone
    ({"question": "q", "answer": '{"name": "Ana", "age": 31}'}, "Final answer:", "json",
     '```json\n{"name": "Ana", "age": 31}\n```'),                                    # json: the gold object, fenced
    ({"question": "q", "answer": "not json"}, "Final answer:", "json", "Final answer: not json"),
]


@pytest.mark.parametrize("row,marker,family,expected", REFERENCES)
def test_reference_completion(row, marker, family, expected):
    from grpokit.families import FAMILIES

    assert reference_completion(row, marker, FAMILIES.get(family)) == expected


def test_json_reference_is_what_the_json_rewards_score_full():
    """The JSON SFT target is an answer json_schema and json_fields give full marks, on the bundled rows."""
    from grpokit.datasets import BUILTIN_DATA
    from grpokit.families import FAMILIES
    from grpokit.rewards.json_fields import check_fields
    from grpokit.rewards.json_schema import check_json

    rows = [json.loads(line) for line in (BUILTIN_DATA / "json" / "train.jsonl").read_text().splitlines()[:20]]
    for row in rows:
        text = reference_completion(row, "Final answer:", FAMILIES["json"])
        assert check_fields(text, row["answer"])[0] == 1.0
        assert check_json(text, row["schema"])[0] == 1.0


def test_sft_run_has_the_grpo_layout_moves_weights_and_evaluates(runs, tiny_model_dir):
    sft = runs["sft"]
    info = json.loads((sft / "run.json").read_text())
    assert info["kind"] == "sft" and info["status"] == "completed" and info["step"] == 2
    assert [c.name for c in RunDir(sft).complete_checkpoints()] == ["checkpoint-2"]
    assert [json.loads(x)["step"] for x in (sft / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    before = load_file(tiny_model_dir / "model.safetensors")
    after = load_file(sft / "checkpoints" / "checkpoint-2" / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before if k in after)
    results = json.loads((sft / "eval" / "results.json").read_text())
    assert [e["step"] for e in results["checkpoints"]] == [0, 2]
    # per-row verdicts of what the model got wrong (data mine-failures reads them)
    failed = results["checkpoints"][-1]["heldout"]["failed"]
    assert all({"question", "answer", "verdict"} <= set(r) for r in failed)


def test_sft_prompts_are_the_grpo_prompt_ids(runs, tokenizer):
    from grpokit.data.load import load_train_rows
    from grpokit.recipe.load import load_recipe
    from grpokit.task import template_of
    from grpokit.training.sft import sft_dataset

    recipe = load_recipe(runs["recipe"])
    row = load_train_rows(recipe)[0]
    item = sft_dataset([row], recipe)[0]
    template = template_of(recipe)
    assert item["prompt"] == template.build(row["question"])  # the same text GRPO's dataset carries


def test_compare_prints_one_table_and_names_missing_evaluations(runs, capsys):
    rewritten = runs["dir"] / "rewritten.jsonl"
    assert main(["data", "perturb", str(runs["dir"] / "eval.jsonl"), str(rewritten), "--seed", "3"]) == 0
    capsys.readouterr()
    # the rewritten set is not evaluated yet: the commands are named, exit 1
    assert main(["compare", str(runs["grpo"]), str(runs["sft"]), "--data", str(rewritten)]) == 1
    err = capsys.readouterr().err
    best = json.loads((runs["sft"] / "eval" / "best.json").read_text())["step"]  # ties (all 0%) go to step 0
    assert f"grpokit eval {runs['sft']} --data {rewritten} --checkpoints {best}" in err
    assert main(["compare", str(runs["grpo"]), str(runs["sft"]), "--data", str(rewritten), "--evaluate",
                 ]) == 0
    out = capsys.readouterr().out
    for words in ("held-out accuracy", "rewritten set accuracy", "drop on the rewritten set", "sft", "grpo", f"step {best}"):
        assert words in out, words
    assert main(["compare", str(runs["grpo"]), str(runs["sft"])]) == 0  # without --data: held-out only


def test_mine_failures_output_passes_data_check(runs, tmp_path, capsys):
    from grpokit.data.load import load_train_rows
    from grpokit.recipe.load import load_recipe

    train_q = load_train_rows(load_recipe(runs["recipe"]))[0]
    prod = write_jsonl(tmp_path / "production.jsonl", [
        {"question": "A user asked: what is 1234 + 1?", "answer": "1235"},  # new: kept
        {"question": "A user asked: what is 1234 + 1?", "answer": "1235"},  # repeated: dropped
        train_q,                                                             # already trained on: dropped
    ])
    out = tmp_path / "round2.jsonl"
    assert main(["data", "mine-failures", str(runs["sft"]), "--from-file", str(prod), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    failed = json.loads((runs["sft"] / "eval" / "results.json").read_text())["checkpoints"][-1]["heldout"]["failed"]
    assert len(rows) == len(failed) + 1 and rows[-1]["source"] == "production.jsonl"
    assert "dropped 1 already in training, 1 repeats" in text
    assert main(["data", "check", str(out)]) == 0


def test_init_from_records_lineage_in_run_json(runs, tmp_path):
    # an evaluated run gives its best checkpoint (here step 0: the untrained tiny model ties at 0%) ...
    from grpokit.training.lineage import resolve_init_from

    assert resolve_init_from(str(runs["sft"]))[1]["kind"] == "run-base"
    # ... an unevaluated one its last complete checkpoint
    earlier = tmp_path / "earlier"
    shutil.copytree(runs["sft"], earlier, ignore=shutil.ignore_patterns("eval"))
    run = tmp_path / "round2"
    assert main(["train", str(runs["recipe"]), "--output-dir", str(run), "--skip-audit", "--init-from",
                 str(earlier), "--set", "train.max_steps=1", "--set", "train.save_steps=1"]) == 0
    lineage = json.loads((run / "run.json").read_text())["init_from"]
    assert lineage["run"] == str(earlier.resolve()) and lineage["step"] == 2
    assert lineage["kind"] == "run-last-checkpoint" and lineage["path"].endswith("checkpoint-2")
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["model"]["name"] == lineage["path"]  # step 0 of the new run is where it started
    from grpokit.report.html import write_report

    html = Path(write_report(run)).read_text()
    assert "started from" in html and "checkpoint" in html


def _adapter_folder(d: Path) -> Path:
    for name in ("config.json", "adapter_config.json"):
        (d / name).write_text("{}")
    return d


@pytest.mark.parametrize("make,what", [
    (lambda d: d, "neither a grpokit run directory"),  # an empty folder
    (_adapter_folder, "LoRA adapter"),                  # a LoRA adapter is not a whole model
])
def test_init_from_refuses_what_it_cannot_start_from(tmp_path, tiny_model_dir, capsys, make, what):
    target = make(tmp_path)
    assert main(["sft", str(_recipe(tmp_path, tiny_model_dir)), "--output-dir", str(tmp_path / "x"), "--init-from", str(target)]) == 2
    assert what in capsys.readouterr().err


def test_preference_recipe_trains_grpo_with_the_learned_reward(tmp_path, tiny_model_dir, tiny_rm_dir, capsys):
    recipe = yaml.safe_load((REPO / "recipes" / "smollm2-preference.yaml").read_text())
    recipe["model"] = {"name": str(tiny_model_dir)}
    recipe["rewards"][0]["params"]["path"] = str(tiny_rm_dir)
    recipe["train"].update(TINY_TRAIN)
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    run = tmp_path / "run"
    assert main(["train", str(tmp_path / "r.yaml"), "--output-dir", str(run)]) == 0
    assert "reward_model is a learned reward and can be gamed" in capsys.readouterr().out
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(0.0 < m["rewards/reward_model/mean"] < 1.0 for m in metrics)
    assert (run / "checkpoints" / "checkpoint-2" / COMPLETE_MARKER).is_file()


def _stream(learned: list[float], rule: list[float]) -> list[dict]:
    return [{"step": i + 1, "reward": a + b, "rewards/reward_model/mean": a, "rewards/length/mean": b}
            for i, (a, b) in enumerate(zip(learned, rule))]


RISE = [0.3 + 0.02 * i for i in range(30)]
HACKING = [
    # (learned reward, rule reward, reward names, finding expected)
    (RISE, [0.5] * 30, ["reward_model", "length"], True),                            # learned climbs, rule flat
    (RISE, [0.5 - 0.01 * i for i in range(30)], ["reward_model", "length"], True),   # ... rule falls
    (RISE, [0.3 + 0.02 * i for i in range(30)], ["reward_model", "length"], False),  # both climb: real progress
    ([0.5] * 30, [0.5] * 30, ["reward_model", "length"], False),                     # nothing moves
    (RISE, [0.5] * 30, ["reward_model"], False),                                     # no rule reward to compare
]


@pytest.mark.parametrize("learned,rule,names,expected", HACKING)
def test_hacking_compares_the_learned_reward_with_rule_rewards(learned, rule, names, expected):
    m = _stream(learned, rule)
    f = detect_reward_hacking(m, [], HealthConfig(), Context(names))
    assert (f is not None and "learned reward" in f.message) is expected, f
