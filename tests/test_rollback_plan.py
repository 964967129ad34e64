"""Which weights a health rollback restores (grpokit.training.rollback.plan_rollback, grpokit.health.best_probed):
a finding's own measured step, else the held-out probe's best reading among the checkpoints before the problem
and the initial model, else the last checkpoint before it. The recorded runs are tests/fixtures/probe_runs."""
from __future__ import annotations

import json
import shutil

import pytest
from test_health import _records
from test_probe import PROBE_RUNS, ROLES

from grpokit.health import Finding, best_probed
from grpokit.health.monitor import diagnose
from grpokit.recipe import validate_raw
from grpokit.run import PROBE_ACCURACY, PROBE_ROWS, RunDir
from grpokit.training.rollback import plan_rollback


def _run(tmp_path, checkpoints, metrics: str | None = None) -> RunDir:
    """A run folder with these complete checkpoints and, if named, a recorded run's metrics.jsonl."""
    run = RunDir(tmp_path)
    if metrics:
        shutil.copy(PROBE_RUNS / metrics, run.metrics)
    for step in checkpoints:
        run.checkpoint_path(step).mkdir(parents=True)
        run.mark_complete(step)
    return run


def _plan(run: RunDir, finding: Finding) -> tuple[dict, str]:
    recipe = validate_raw({"data": {"train": "builtin:arithmetic/train.jsonl"}, "rewards": [{"name": "format"}]})
    plan: dict = {}
    line = plan_rollback(recipe, run, finding, plan)
    return plan, line


def test_rollback_plan_restores_the_probes_best_checkpoint(tmp_path):
    run = _run(tmp_path, (5, 10, 15))
    plan, said = _plan(run, Finding("probe_drop", 15, "m", since=11, restore=10))
    assert plan["checkpoint"] == "checkpoint-10" and said.startswith("rollback: restore checkpoint-10")
    shutil.rmtree(run.checkpoint_path(10))  # rotated away: the newest complete one before it
    assert _plan(run, Finding("probe_drop", 15, "m", since=11, restore=10))[0]["checkpoint"] == "checkpoint-5"
    # a finding without a measured step (and no probe readings): the last checkpoint before `since - 1`
    assert _plan(run, Finding("correctness_collapse", 15, "m", since=11))[0]["checkpoint"] == "checkpoint-5"


@pytest.mark.parametrize("fixture, finding, checkpoints, restored, said", [
    # The probe fell 62.5% -> 37.5% by checkpoint-5: a finding read on the training rewards at step 10 (since 8)
    # would restore checkpoint-5, which had already lost a third of the start's rows; the probe's best is step 0.
    ("sft-then-grpo-lr2e-5.jsonl", Finding("entropy_collapse", 10, "m", since=8), (5, 10), None,
     "rollback: restart from the initial model (the held-out probe's best of the weights before the problem: "
     "62.5% at step 0, 37.5% at step 5)"),
    # A run that learned (8.3% -> 20.8% at checkpoint-10): the checkpoint before the problem is also the probe's best.
    ("demo-20-steps.jsonl", Finding("correctness_collapse", 20, "m", since=16), (5, 10, 15, 20), "checkpoint-10",
     "rollback: restore checkpoint-10, learning_rate"),
    # One row of 48 (62.5% at step 0, 60.4% at 5 and 10) is still the best reading: 10 steps that gained nothing
    # measurable are given up for the weights the probe scored highest.
    ("sft-then-grpo-lr2e-5-after-rollback.jsonl", Finding("entropy_collapse", 12, "m", since=12), (5, 10), None,
     "rollback: restart from the initial model (the held-out probe's best of the weights before the problem: "
     "62.5% at step 0, 60.4% at step 5, 60.4% at step 10)"),
])
def test_rollback_restores_the_weights_the_probe_scored_best(tmp_path, fixture, finding, checkpoints, restored, said):
    plan, line = _plan(_run(tmp_path, checkpoints, fixture), finding)
    assert plan["checkpoint"] == restored and line.startswith(said)


def test_the_exploring_arms_rollback_restarts_from_the_model_the_probe_scored_best(tmp_path):
    """A recorded run (2026-12-06, benchmarks/grpo_after_sft.py --seed 1 --arms explore, steps 0-19 as the monitor saw
    them): T 1.0, 16 completions, clip-higher from the SFT model. The probe read 56.2% at step 0 and 45.8% at
    checkpoint-10 (within the noise of 48 rows: no probe_drop); entropy fell 0.119 -> 0.045 and entropy_collapse
    fired at step 19. Before best_probed the rollback restored checkpoint-10 and the arm ended 6 points below SFT."""
    recorded = "explore-seed1-before-rollback.jsonl"
    found = {f.code: f for f in diagnose(_records(PROBE_RUNS / recorded), [], reward_names=ROLES)}
    assert "probe_drop" not in found and found["entropy_collapse"].step == 19
    plan, line = _plan(_run(tmp_path, (10,), recorded), found["entropy_collapse"])
    assert plan["checkpoint"] is None and plan["step"] == 0
    assert line.startswith("rollback: restart from the initial model (the held-out probe's best of the weights "
                           "before the problem: 56.2% at step 0, 45.8% at step 10)")


def test_an_unprobed_checkpoint_is_restored_as_before(tmp_path):
    # checkpoint-10 was saved without a probe reading (a signal's save): the probe's fall 0 -> 5 says nothing of it
    run = _run(tmp_path, (5, 10))
    run.metrics.write_text("".join(json.dumps(r) + "\n" for r in (
        {"step": 0, PROBE_ACCURACY: 0.6, PROBE_ROWS: 48}, {"step": 5, PROBE_ACCURACY: 0.4, PROBE_ROWS: 48})))
    plan, line = _plan(run, Finding("entropy_collapse", 14, "m", since=12))
    assert plan["checkpoint"] == "checkpoint-10" and line.startswith("rollback: restore checkpoint-10, learning_rate")


def test_rollback_compares_probe_readings_on_as_many_rows_only():
    metrics = [{"step": 0, PROBE_ACCURACY: 0.9, PROBE_ROWS: 10},  # a resume with another health.probe_rows
               {"step": 5, PROBE_ACCURACY: 0.5, PROBE_ROWS: 48}, {"step": 10, PROBE_ACCURACY: 0.6, PROBE_ROWS: 48}]
    assert best_probed(metrics, [0, 5, 10]) == (10, {5: 0.5, 10: 0.6})
    assert best_probed(metrics, [0, 5]) == (5, {5: 0.5})
    tied = metrics + [{"step": 15, PROBE_ACCURACY: 0.6, PROBE_ROWS: 48}]
    assert best_probed(tied, [5, 10, 15])[0] == 15  # ties: the newer weights, fewer steps lost
    assert best_probed([{"step": 3, "loss": 1.0}], [0]) is None


def test_a_rollback_passes_over_a_checkpoint_whose_optimizer_state_cannot_be_restored(tmp_path):
    """Restoring it failed the continued run at its first step with torch's weights_only text."""
    import torch

    run = _run(tmp_path, (5, 10, 15))
    torch.save(torch.nn.Linear(2, 2), run.checkpoint_path(10) / "optimizer.pt")
    plan, said = _plan(run, Finding("probe_drop", 15, "m", since=11, restore=10))
    assert plan["checkpoint"] == "checkpoint-5", plan
    assert said.startswith("rollback: restore checkpoint-5") and "checkpoint-10 passed over: optimizer.pt" in said
    assert "weights_only" not in said
