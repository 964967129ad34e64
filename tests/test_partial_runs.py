"""A run that did not reach its end says so: run.json, eval's results, the report and the demo name the step they
hold (grpokit.run.run_end), and a resumed run's training time adds up."""
from __future__ import annotations

import json
import os
import signal

import pytest
import yaml
from transformers import TrainerCallback

from conftest import addition_recipe
from grpokit.cli import main
from grpokit.recipe import load_recipe
from grpokit.run import run_end

# (run.json, max_steps, reached its end?, the note's words)
END_CASES = [
    ({"status": "completed", "step": 30}, 30, True, None),
    ({"status": "completed", "step": 7}, -1, True, None),  # epochs: no step target
    ({"status": "interrupted", "step": 24, "reason": "SIGTERM"}, 30,
     False, "the run stopped at step 24 of 30 (interrupted: SIGTERM): these figures are from step 24"),
    ({"status": "stopped", "step": 5, "reason": "health monitor: kl_spike at step 5"}, 30, False,
     "(stopped by the health monitor: health monitor: kl_spike at step 5)"),
    ({"status": "failed", "step": 3}, 30, False, "at step 3 of 30 (failed)"),
    ({"status": "running", "step": 2}, 30, False, "still running, or killed"),
    ({"status": "completed", "step": 24}, 30, False, "at step 24 of 30 (completed)"),  # max_steps raised later
    ({}, 30, False, "before its first step was recorded"),
    ({"status": "failed", "step": True}, 30, False, "before its first step was recorded"),  # a damaged record
]


@pytest.mark.parametrize("status,max_steps,reached,words", END_CASES)
def test_run_end(status, max_steps, reached, words):
    end = run_end(status, max_steps)
    assert end["reached_end"] is reached
    assert (end["note"] is None) if words is None else (words in end["note"]), end


class SignalAt(TrainerCallback):
    """Sends this process SIGTERM at the end of a step, as `kill PID` would during training. It runs after
    grpokit's own callbacks, so the stop is seen at the end of the next step: the run stops at `step + 1`."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


def _recipe(tmp_path, model_dir, steps: int = 4):
    return addition_recipe(tmp_path, model_dir, rows=8, train={
        "max_steps": steps, "num_generations": 2, "per_device_train_batch_size": 2, "max_completion_length": 8,
        "save_steps": 100, "logging_steps": 1})


def test_an_interrupted_run_says_its_step_everywhere_and_resume_adds_up_its_time(tmp_path, tiny_model_dir, capsys):
    from grpokit.training import train

    run = tmp_path / "run"
    summary = train(load_recipe(_recipe(tmp_path, tiny_model_dir)), run_dir=run, callbacks=[SignalAt(1)]).summary
    assert (summary["status"], summary["step"]) == ("interrupted", 2)
    first = json.loads((run / "run.json").read_text())
    assert first["seconds"] == first["seconds_this_session"] > 0

    assert main(["eval", str(run)]) == 0
    out = capsys.readouterr().out
    assert "the run stopped at step 2 of 4 (interrupted: SIGTERM): these figures are from step 2" in out
    results = json.loads((run / "eval" / "results.json").read_text())
    assert results["run_end"]["reached_end"] is False and results["run_end"]["step"] == 2

    assert main(["report", str(run)]) == 0
    page = (run / "report" / "report.html").read_text()
    assert "stopped early" in page and "these figures are from step 2" in page

    assert main(["train", "--resume", str(run)]) == 0
    done = json.loads((run / "run.json").read_text())
    assert (done["status"], done["step"]) == ("completed", 4)
    assert done["seconds"] == pytest.approx(first["seconds"] + done["seconds_this_session"], abs=0.2)
    assert run_end(done, 4)["note"] is None


def test_a_demo_stopped_during_training_evaluates_nothing_more_and_says_how_to_go_on(tmp_path, tiny_model_dir,
                                                                                     capsys):
    from grpokit.demo import run_demo

    recipe = _recipe(tmp_path, tiny_model_dir)
    raw = yaml.safe_load(recipe.read_text())
    raw["data"]["eval_fraction"] = 0.25
    recipe.write_text(yaml.safe_dump(raw))
    result = run_demo(output_dir=str(tmp_path / "demo"), task="arithmetic-grpo", recipe_path=recipe, callbacks=[SignalAt(1)])
    out = capsys.readouterr().out
    assert result["after"] is None and result["run_end"]["step"] == 2
    assert "demo stopped at step 2 of 4" in out and "the trained model was not evaluated" in out
    assert f"grpokit train --resume {tmp_path / 'demo'}" in out
    assert "demo finished" not in out
    assert json.loads((tmp_path / "demo" / "demo.json").read_text())["run_end"]["status"] == "interrupted"
