"""Slow tier: the preference family by hand, as docs/workflows.md runs it, on tiny models (seconds): a reward model
from the bundled rankings (`grpokit rm train`), GRPO against it (`grpokit train`), then the held-out evaluation
(`grpokit eval RUN_DIR`): each checkpoint's mean score, its win rate against the base by the reward model, the rule
that checks it (direct_answer) and the length. The embedded model's run of the same family is the demo
(`grpokit demo --task preference`, docs/measurements.md)."""
from __future__ import annotations

import json

import pytest
import yaml
from conftest import REPO

from grpokit.cli import main

pytestmark = pytest.mark.slow


def test_rm_train_then_grpo_then_heldout_win_rate_from_the_command_line(tmp_path, tiny_model_dir, tiny_rm_base_dir,
                                                                        capsys):
    rm = tmp_path / "rm-style"
    assert main(["rm", "train", "builtin:preference/rankings.jsonl", "--base", str(tiny_rm_base_dir), "--out", str(rm),
                 "--max-steps", "2", "--batch-size", "4", "--learning-rate", "1e-3"]) == 0
    recipe = yaml.safe_load((REPO / "recipes" / "smollm2-preference.yaml").read_text())
    recipe["model"] = {"name": str(tiny_model_dir)}
    recipe["rewards"][0]["params"]["path"] = str(rm)
    recipe["train"].update(learning_rate=1e-3, num_generations=2, per_device_train_batch_size=4,
                           max_completion_length=8, max_steps=2, save_steps=1, temperature=1.0)
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe))
    run = tmp_path / "run"
    assert main(["train", str(tmp_path / "r.yaml"), "--output-dir", str(run)]) == 0
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    # The rule is logged beside the learned reward (weight 0: it steers nothing).
    assert all("rewards/reward_model/mean" in m and "rewards/direct_answer/mean" in m for m in metrics)
    capsys.readouterr()
    assert main(["eval", str(run)]) == 0
    out = capsys.readouterr().out
    assert "win vs base (reward_model)" in out and "direct_answer" in out
    results = json.loads((run / "eval" / "results.json").read_text())
    assert results["rows"] == 32 and [e["step"] for e in results["checkpoints"]] == [0, 1, 2]
    for e in results["checkpoints"][1:]:
        w = e["vs_base"]["reward_model"]
        assert w["rows"] == 32 and 0.0 <= w["win_rate"] <= 1.0
        assert e["heldout"]["format_rate"] is not None and e["heldout"]["mean_length"] > 0
