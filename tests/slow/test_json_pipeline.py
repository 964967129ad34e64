"""Slow tier: the JSON family's pipeline end to end, as docs/quickstart.md "JSON extraction" runs it, on a tiny
model (the shipped recipe with its bundled rows; only the model, the steps and the sizes shrunk): data check,
recipe check, reward audit, `grpokit demo --task json`, `grpokit eval` of every checkpoint, the report.

A tiny random model writes no JSON (every figure is 0), so what is checked is the seams between the stages: the
rows pass the JSON task's checks, the audit runs the schema tricks for json_fields and finds none paying, the
demo trains (the weights move, both rewards are logged every step) and evaluates with field accuracy and valid
rate, and `grpokit eval` of the run recomputes the demo's before/after figures exactly (one evaluator). The
measured run on the embedded model: docs/measurements.md "JSON extraction".
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from grpokit.cli import main

pytestmark = pytest.mark.slow
RECIPE = str(Path(__file__).resolve().parents[2] / "recipes" / "smollm2-json-extraction.yaml")
STEPS = 3


def test_json_extraction_pipeline_on_a_tiny_model(tmp_path, tiny_model_dir, capsys):
    small = ["--set", f"model.name={tiny_model_dir}", "--set", f"train.max_steps={STEPS}", "--set",
             "train.save_steps=1", "--set", "train.num_generations=4", "--set", "train.per_device_train_batch_size=8",
             "--set", "train.max_completion_length=12", "--set", "data.eval_max_rows=6",
             "--set", "train.learning_rate=1e-3"]
    # + a shaping reward with spread on random text (tests/reward_fns.py): a tiny model writes no JSON, so the two
    # JSON rewards alone tie every group and nothing would be trained
    shaped = small + ["--set", 'rewards=[{name: json_fields}, {name: json_schema, weight: 0.5}, '
                      '{name: "reward_fns:text_spread", role: shaping, weight: 0.1}]']
    for name in ("train", "eval"):
        assert main(["data", "check", f"builtin:json/{name}.jsonl", "--task", "json"]) == 0
    assert main(["recipe", "check", RECIPE, *small]) == 0
    assert main(["rewards", "audit", RECIPE]) == 0
    audit = capsys.readouterr().out
    assert "schema tricks, for json_fields" in audit and "no trick scored more than an honest wrong answer" in audit

    run = tmp_path / "demo-json"
    assert main(["demo", "--task", "json", "--output-dir", str(run), *shaped]) == 0
    demo = json.loads((run / "demo.json").read_text())
    printed = capsys.readouterr().out
    assert "field accuracy" in printed and "valid rate" in printed
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(0, STEPS + 1))  # 0: the held-out probe's line
    assert "probe/accuracy" in metrics[0] and "probe/accuracy" in metrics[-1]  # field accuracy, greedy
    metrics = metrics[1:]
    assert all(isinstance(m.get(f"rewards/{r}/mean"), float) for m in metrics for r in ("json_fields", "json_schema"))
    before = load_file(Path(tiny_model_dir) / "model.safetensors")
    after = load_file(run / "checkpoints" / f"checkpoint-{STEPS}" / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before if k in after)  # it trained

    assert main(["eval", str(run)]) == 0
    results = json.loads((run / "eval" / "results.json").read_text())
    by_step = {e["step"]: e["heldout"] for e in results["checkpoints"]}
    assert sorted(by_step) == list(range(STEPS + 1)) and results["metric"] == "field accuracy"
    for stage, step in (("before", 0), ("after", STEPS)):  # one evaluator: the demo's figures, recomputed
        assert by_step[step]["metrics"] == demo[stage]["metrics"], stage
        assert list(by_step[step]["metrics"]) == ["field accuracy", "valid rate"]
        assert by_step[step]["mean_length"] == demo[stage]["mean_length"]
    assert "valid rate" in capsys.readouterr().out  # `grpokit eval`'s table has the column

    assert main(["report", str(run)]) == 0
    page = (run / "report" / "report.html").read_text()
    assert "held-out field accuracy" in page and "held-out valid rate" in page
