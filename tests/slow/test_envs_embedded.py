"""Slow tier: both tool environments train a few GRPO steps on the real embedded SmolLM2-135M, through
TRL's own tool-calling rollouts (environment_factory), and the weights move."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from grpokit.cli import main

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SMALL = ["--set", "train.num_generations=2", "--set", "train.per_device_train_batch_size=2",
         "--set", "train.max_steps=2", "--set", "train.save_steps=2", "--skip-audit"]

@pytest.mark.parametrize("recipe,tokens", [("smollm2-calculator-tools.yaml", 48), ("smollm2-repofix.yaml", 16)])
def test_tool_environment_trains_on_the_embedded_model(recipe, tokens, tmp_path, embedded_model_dir):
    run = tmp_path / "run"
    # reward_fns:long_length_spread spreads scores on texts under 100 characters (short episodes), so the weights
    # must move even when the 135M model never calls a tool (then every task reward of a group is equal).
    rewards = ('[{name: task_success}, {name: tool_args, weight: 0.25}, '
               '{name: "reward_fns:long_length_spread", role: shaping, weight: 0.1}]')
    code = main(["train", str(REPO / "recipes" / recipe), "--output-dir", str(run), *SMALL,
                 "--set", f"train.max_completion_length={tokens}", "--set", f"rewards={rewards}"])
    assert code == 0
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert all("tools/call_frequency" in m and "rewards/task_success/mean" in m for m in metrics)
    before = load_file(embedded_model_dir / "model.safetensors")
    after = load_file(run / "checkpoints" / "checkpoint-2" / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before if k in after)
    # the checkpoint's tokenizer carries the tool template training used (eval and export read it)
    assert "<tool_call>" in (run / "checkpoints" / "checkpoint-2" / "chat_template.jinja").read_text()
