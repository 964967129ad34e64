"""Slow tier: `grpokit train --num-processes 2` really runs two DDP processes (gloo on CPU) through accelerate.

Uses the conftest tiny model (2 layers, hidden 64) rather than the embedded SmolLM2-135M: the point is the
process layout (one writer of the run directory, a resume in two processes), and two processes each loading
the 135M model on the shared 2-core machine take several minutes per run, the tiny one about a minute.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import write_jsonl

from grpokit.cli import main
from grpokit.families.math import generate
from grpokit.run.checkpoints import COMPLETE_MARKER

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def _recipe(tmp_path: Path, model_dir: Path, max_steps: int) -> Path:
    data = write_jsonl(tmp_path / "train.jsonl", generate(24, seed=7))
    recipe = {
        "model": {"name": str(model_dir)},
        "data": {"train": str(data), "eval_fraction": 0.25, "template": "plain_en"},
        # Built-in rewards only: the worker processes do not see rewards registered inside a test.
        "rewards": [{"name": "length", "params": {"min_chars": 30}}, {"name": "format"}],
        "train": {"learning_rate": 1e-3, "num_generations": 2, "per_device_train_batch_size": 4,
                  "max_completion_length": 8, "max_steps": max_steps, "save_steps": 1, "logging_steps": 1,
                  "num_samples_logged": 2, "torch_threads": 1},
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def _steps(path: Path) -> list[int]:
    return [json.loads(line)["step"] for line in path.read_text().splitlines() if line.strip()]


def _checkpoints(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "checkpoints").glob("checkpoint-*"))


def test_two_processes_write_one_run_dir_and_resume(tmp_path, tiny_model_dir, monkeypatch, capfd):
    monkeypatch.setenv("PYTHONPATH", str(REPO / "src"))  # the worker processes import this tree's grpokit
    run = tmp_path / "run"
    recipe = _recipe(tmp_path, tiny_model_dir, max_steps=2)
    assert main(["train", str(recipe), "--output-dir", str(run), "--num-processes", "2", "--skip-audit"]) == 0
    out = capfd.readouterr().out  # both workers write to this test's stdout: each status line must come once
    lines = out.splitlines()
    for status in (f"-> {run}", "step 1/2 |", "step 2/2 |", "completed at step 2 "):
        assert sum(status in line for line in lines) == 1, (status, out)

    assert _steps(run / "metrics.jsonl") == [1, 2]  # one line per step, not one per rank
    assert sorted(set(_steps(run / "samples.jsonl"))) == [1, 2] and len(_steps(run / "samples.jsonl")) == 4
    assert _checkpoints(run) == ["checkpoint-1", "checkpoint-2"]
    ck = run / "checkpoints" / "checkpoint-2"
    assert (ck / COMPLETE_MARKER).is_file()
    assert {p.name for p in ck.glob("rng_state_*.pth")} == {"rng_state_0.pth", "rng_state_1.pth"}  # two ranks
    state = json.loads((run / "run.json").read_text())
    assert state["status"] == "completed" and state["step"] == 2

    # Resume in two processes with one more step: the saved recipe is what --resume reads.
    cfg = yaml.safe_load((run / "config.yaml").read_text())
    cfg["train"]["max_steps"] = 3
    (run / "config.yaml").write_text(yaml.safe_dump(cfg))
    assert main(["train", "--resume", str(run), "--num-processes", "2"]) == 0
    assert _steps(run / "metrics.jsonl") == [1, 2, 3]
    assert _checkpoints(run) == ["checkpoint-1", "checkpoint-2", "checkpoint-3"]
    state = json.loads((run / "run.json").read_text())
    assert state["status"] == "completed" and state["step"] == 3
    assert state["resumed_from"].endswith("checkpoint-2")


def test_the_held_out_probe_on_two_processes(tmp_path, tiny_model_dir, monkeypatch):
    """Under DDP every rank holds the whole model and runs the probe (the same rows, the same figures), and the
    main process writes its lines once: step 0's, decided on the main process and broadcast, and each
    checkpoint's. A rank that logged where another did not would hang the next collective call."""
    monkeypatch.setenv("PYTHONPATH", str(REPO / "src"))
    recipe = yaml.safe_load(_recipe(tmp_path, tiny_model_dir, max_steps=2).read_text())
    recipe["rewards"].append({"name": "math_correctness"})  # a correctness reward: the probe has a metric
    path = tmp_path / "probe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    run = tmp_path / "run"
    assert main(["train", str(path), "--output-dir", str(run), "--num-processes", "2", "--skip-audit"]) == 0
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0, 1, 2]
    assert [m["step"] for m in metrics if "probe/accuracy" in m] == [0, 1, 2] and metrics[0]["probe/rows"] == 6
    assert json.loads((run / "run.json").read_text())["status"] == "completed"


def test_sigterm_to_the_launcher_saves_a_checkpoint_on_every_rank(tmp_path, tiny_model_dir):
    run = tmp_path / "run"
    recipe = _recipe(tmp_path, tiny_model_dir, max_steps=200)
    cfg = yaml.safe_load(recipe.read_text())
    cfg["train"]["save_steps"] = 1000  # only the signal makes a checkpoint
    recipe.write_text(yaml.safe_dump(cfg))
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.Popen([sys.executable, "-m", "grpokit", "train", str(recipe), "--output-dir", str(run),
                             "--num-processes", "2", "--skip-audit"], env=env)
    deadline = time.time() + 400
    while time.time() < deadline and not (run / "metrics.jsonl").is_file():
        time.sleep(1)
    assert (run / "metrics.jsonl").is_file(), "training never logged a step"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=300) == 0
    state = json.loads((run / "run.json").read_text())
    assert state["status"].startswith("interrupted"), state["status"]
    last = run / "checkpoints" / f"checkpoint-{state['step']}"
    assert (last / COMPLETE_MARKER).is_file()
    assert _steps(run / "metrics.jsonl") == list(range(1, state["step"] + 1))


def test_health_rollback_then_stop_reach_both_ranks(tmp_path, tiny_model_dir, monkeypatch):
    # Every completion hits the 8-token limit, so the truncation detector fires at step 1: the main process
    # decides a rollback (restart from the initial model), then, with no rollback left, a stop. Both ranks
    # must follow each decision, or the collective calls of the next step would hang.
    monkeypatch.setenv("PYTHONPATH", str(REPO / "src"))
    run = tmp_path / "run"
    recipe = _recipe(tmp_path, tiny_model_dir, max_steps=5)
    cfg = yaml.safe_load(recipe.read_text())
    cfg["health"] = {"actions": {"truncation": "rollback"}, "max_rollbacks": 1}
    recipe.write_text(yaml.safe_dump(cfg))
    assert main(["train", str(recipe), "--output-dir", str(run), "--num-processes", "2", "--skip-audit"]) == 0

    state = json.loads((run / "run.json").read_text())
    assert (state["status"], state["reason"]) == ("stopped", "health monitor: truncation at step 1"), state
    assert len(state["rollbacks"]) == 1 and state["rollbacks"][0]["restored"] is None
    actions = [json.loads(line)["action"] for line in (run / "health.jsonl").read_text().splitlines()]
    assert len(actions) == 2 and actions[0].startswith("rollback") and actions[1].startswith("stop")  # written once
    assert _steps(run / "metrics.rolled_back.jsonl") == [1]
    assert _steps(run / "metrics.jsonl") == [1]
    assert yaml.safe_load((run / "config.yaml").read_text())["train"]["learning_rate"] == 5e-4  # halved once


def test_refill_on_two_processes_agrees_on_its_rounds(tmp_path, tiny_model_dir, monkeypatch):
    """DAPO's dynamic sampling over 2 DDP processes: every process runs the same refill rounds (each round's
    generation gathers across them, so a disagreement would hang, not pass) and trains whole groups of its share.
    `format` alone on the untrained tiny model ties every group: each step refills its full 2 rounds."""
    monkeypatch.setenv("PYTHONPATH", str(REPO / "src"))
    recipe = yaml.safe_load(_recipe(tmp_path, tiny_model_dir, max_steps=2).read_text())
    recipe["rewards"] = [{"name": "format"}]
    recipe["selection"] = {"enabled": True, "refill": True, "refill_max_rounds": 2}
    path = tmp_path / "refill.yaml"
    path.write_text(yaml.safe_dump(recipe))
    run = tmp_path / "run"
    assert main(["train", str(path), "--output-dir", str(run), "--num-processes", "2", "--skip-audit"]) == 0
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert all(m["grpokit/refill/rounds"] == 2 for m in metrics)  # no group of any process had a spread
    assert all(m["grpokit/refill/extra_groups"] == 2 * 2 for m in metrics)  # 2 groups a process, 2 rounds
    assert json.loads((run / "run.json").read_text())["status"] == "completed"


def test_two_processes_train_the_same_with_the_tree_as_in_trls_layout(tmp_path, tiny_model_dir, monkeypatch):
    # Each process computes its own micro-batch over the tree (grpokit.training.logps); DDP averages the
    # gradients as before. The same seed with and without the tree: the same samples and rewards at every step
    # (the decoding loop draws generate's tokens: generation.draw: vocabulary), losses equal to float rounding,
    # and the positions recorded.
    monkeypatch.setenv("PYTHONPATH", str(REPO / "src"))
    metrics = {}
    for shared in (True, False):
        run = tmp_path / f"run-{shared}"
        recipe = _recipe(tmp_path, tiny_model_dir, max_steps=2)
        assert main(["train", str(recipe), "--output-dir", str(run), "--num-processes", "2", "--skip-audit",
                     "--set", f"train.shared_prefix={str(shared).lower()}",
                     "--set", "generation.draw=vocabulary"]) == 0
        metrics[shared] = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    for tree, trl in zip(metrics[True], metrics[False], strict=True):
        assert tree["reward"] == trl["reward"] and tree["completions/mean_length"] == trl["completions/mean_length"]
        assert tree["loss"] == pytest.approx(trl["loss"], rel=1e-3, abs=1e-6)
        assert tree["grpokit/positions/computed"] < tree["grpokit/positions/trl_layout"]
        assert trl["grpokit/positions/computed"] == trl["grpokit/positions/trl_layout"]
