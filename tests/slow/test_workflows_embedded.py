"""Slow tier: the workflows on the real embedded SmolLM2-135M — a reward model from the bundled rankings, then
two GRPO steps of the preference recipe with it; a few SFT steps of the arithmetic SFT recipe, evaluated."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from grpokit.cli import main

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def test_reward_model_then_preference_grpo_on_the_embedded_model(tmp_path, capsys):
    rm = tmp_path / "rm-style"
    assert main(["rm", "train", "builtin:preference/rankings.jsonl", "--base", "default", "--out", str(rm),
                 "--max-steps", "4", "--batch-size", "4"]) == 0
    info = json.loads((rm / "rm.json").read_text())
    assert info["heldout_pairs"] == 48 and info["heldout"]["accuracy"] is not None
    recipe = yaml.safe_load((REPO / "recipes" / "smollm2-preference.yaml").read_text())
    recipe["rewards"][0]["params"]["path"] = str(rm)
    recipe["train"].update(max_steps=2, save_steps=2, num_generations=2, per_device_train_batch_size=4,
                           max_completion_length=24)
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    run = tmp_path / "run"
    assert main(["train", str(tmp_path / "r.yaml"), "--output-dir", str(run)]) == 0
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and "rewards/reward_model/mean" in metrics[-1]


def test_sft_recipe_trains_and_evaluates_on_the_embedded_model(tmp_path):
    run = tmp_path / "sft"
    assert main(["sft", str(REPO / "recipes" / "smollm2-arithmetic-sft.yaml"), "--output-dir", str(run),
                 "--set", "train.max_steps=4", "--set", "train.save_steps=4", "--set", "train.logging_steps=2"]) == 0
    assert main(["eval", str(run), "--max-rows", "8"]) == 0
    results = json.loads((run / "eval" / "results.json").read_text())
    assert [e["step"] for e in results["checkpoints"]] == [0, 4]
