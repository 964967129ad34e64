"""Slow tier: the tool task's whole loop through the command line on a tiny model, SFT on the demonstrations ->
GRPO --init-from the SFT run -> tool evaluation of every checkpoint, and the format SFT taught survives each link
(the checkpoints' tool template and parser, the lineage, TRL's rollout, the evaluation of the SFT checkpoint as
step 0). Whether the format itself survives needs a model that learns it: a tiny random model did not in 40 SFT
steps (loss 1.0, no parseable call), so that is measured on the embedded model by `grpokit demo --task tools`
(docs/measurements.md "Tool calling: SFT warm start, then GRPO"), not asserted here."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpokit.cli import main

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
TINY = ["--set", "model.gradient_checkpointing=false", "--set", "data.eval_max_rows=4"]
# A tiny random model learns the demonstrations' layout in a few dozen steps at a large learning rate.
SFT = ["--set", "train.learning_rate=3e-3", "--set", "train.max_steps=40", "--set", "train.save_steps=40",
       "--set", "train.lr_scheduler_type=constant"]
GRPO = ["--set", "train.max_steps=2", "--set", "train.save_steps=2", "--set", "train.num_generations=2",
        "--set", "train.per_device_train_batch_size=4", "--set", "train.learning_rate=1e-5"]


def test_sft_then_grpo_from_it_then_tool_eval_keeps_the_tool_format(tiny_tool_model_dir, tmp_path, capsys):
    from grpokit.envs.chat import TOOL_CHATML

    # Four rows, each demonstrated ten times in 40 steps: the SFT's best chance at the layout on a tiny model
    rows = (REPO / "src" / "grpokit" / "datasets" / "tools" / "calculator.jsonl").read_text().splitlines()[:4]
    (tmp_path / "four.jsonl").write_text("\n".join(rows) + "\n")
    model = ["--set", f"model.name={tiny_tool_model_dir}", "--set", f"data.train={tmp_path / 'four.jsonl'}"]
    sft, grpo = tmp_path / "sft", tmp_path / "grpo"
    assert main(["sft", str(REPO / "recipes" / "smollm2-calculator-sft.yaml"), "--output-dir", str(sft),
                 *model, *TINY, *SFT]) == 0
    assert main(["train", str(REPO / "recipes" / "smollm2-calculator-tools.yaml"), "--output-dir", str(grpo),
                 "--init-from", str(sft), *model, *TINY, *GRPO]) == 0
    out = capsys.readouterr().out
    assert f"started from {sft} step 40" in out and "warmed up on prompts" not in out
    assert main(["eval", str(grpo), "--checkpoints", "all", "--max-rows", "4"]) == 0

    status = json.loads((grpo / "run.json").read_text())
    assert status["init_from"]["path"] == str(sft / "checkpoints" / "checkpoint-40")
    for ck in (sft / "checkpoints" / "checkpoint-40", grpo / "checkpoints" / "checkpoint-2"):
        config = json.loads((ck / "tokenizer_config.json").read_text())
        assert (ck / "chat_template.jinja").read_text() == TOOL_CHATML and config.get("response_template"), ck
    metrics = [json.loads(line) for line in (grpo / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and all("tools/call_frequency" in m for m in metrics)  # episodes
    doc = json.loads((grpo / "eval" / "results-tools.json").read_text())
    by_step = {e["step"]: e for e in doc["checkpoints"]}
    # step 0 is the run's starting model, the SFT checkpoint, evaluated with the tools it was taught
    assert set(by_step) == {0, 2} and by_step[0]["model"] == status["init_from"]["path"]
    for e in by_step.values():
        assert e["greedy"] and e["episodes"] == 4 and e["tool_call_rate"] is not None, e
        assert all(s["messages"] and s["messages"][0]["role"] == "assistant" for s in e["samples"]), e
