"""The live health monitor on a tiny model whose run is made to fail: warn, stop, and rollback end to end.

The failure is injected through a test reward: random scores (every group has spread) except on chosen
reward calls, where every completion scores the same, so TRL logs frac_reward_zero_std = 1.0 for that
step. That is deterministic, unlike waiting for an absurd learning rate to blow up a tiny model.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import make_recipe
from reward_fns import INJECT  # the own reward's switch: calls (1-based) on which every completion scores 0.5

from grpokit.errors import GrpokitError
from grpokit.recipe.load import load_recipe, load_run_recipe
from grpokit.run.rundir import RunDir
from grpokit.training.grpo import train


def _recipe(tmp_path: Path, model_dir: Path, health: dict, preflight: dict | None = None, **train_cfg):
    # No held-out probe here: its scoring would call the injected reward too and shift the calls it counts.
    path = make_recipe(tmp_path, model_dir, [{"name": "reward_fns:injected"}],
                       sections={"health": {"window": 2, "probe_rows": 0, **health}, "preflight": preflight or {}},
                       **train_cfg)
    recipe = load_recipe(path)
    INJECT["calls"] = 0  # the recipe check's trial call of the reward is not a training step's
    return recipe


def _lines(path: Path) -> list[dict]:
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()] if path.is_file() else []


def test_rollback_restores_the_checkpoint_before_the_problem_and_continues(tmp_path, tiny_model_dir):
    INJECT.update(calls=0, bad={3, 4})  # steps 3 and 4 carry no signal; after the rollback all is well
    recipe = _recipe(tmp_path, tiny_model_dir, {"actions": {"zero_variance_groups": "rollback"}, "max_rollbacks": 1},
                     max_steps=4)
    run = tmp_path / "run"
    summary = train(recipe, run_dir=run).summary

    health = [h for h in _lines(run / "health.jsonl") if h["code"] == "zero_variance_groups"]
    assert len(health) == 1 and health[0]["step"] == 4 and health[0]["evidence"]["since_step"] == 3
    action = health[0]["action"]
    assert action.startswith("rollback: restore checkpoint-1") and "learning_rate 0.001 -> 0.0005" in action
    assert "beta 0 -> 0.04" in action and "reference model" in action

    assert summary["status"] == "completed" and summary["step"] == 4
    assert summary["rollbacks"] == [{"code": "zero_variance_groups", "at_step": 4, "restored": "checkpoint-1",
                                     "learning_rate": 0.0005, "beta": 0.04}]
    metrics = _lines(run / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2, 3, 4]
    assert [m["step"] for m in _lines(run / "metrics.rolled_back.jsonl")] == [2, 3, 4]
    # After the rollback: the halved learning rate is the one used, and kl exists (beta > 0 now).
    assert metrics[0]["learning_rate"] == 1e-3 and all(abs(m["learning_rate"] - 5e-4) < 1e-12 for m in metrics[1:])
    assert "kl" not in metrics[0] and all("kl" in m for m in metrics[1:])
    # The KL reference is the restored checkpoint (hard-linked into reference/), not the initial model: the first
    # step after the rollback samples from exactly the reference's weights, so its kl is 0.
    assert metrics[1]["kl"] < 1e-6 and metrics[-1]["kl"] > 0
    linked = run / "reference" / "model.safetensors"
    assert linked.stat().st_ino == (run / "checkpoints" / "checkpoint-1" / "model.safetensors").stat().st_ino
    assert all(m["frac_reward_zero_std"] == 0 for m in metrics)
    saved = yaml.safe_load((run / "config.yaml").read_text())["train"]
    assert saved["learning_rate"] == 5e-4 and saved["beta"] == 0.04
    assert [c.name for c in RunDir(run).complete_checkpoints()] == [f"checkpoint-{i}" for i in range(1, 5)]


def test_stop_and_exhausted_rollbacks_stop_the_run(tmp_path, tiny_model_dir):
    # Preflight scores two prompts first (one reward call), then no signal ever: the first finding (step 2, nothing saved before it) restarts from the initial model;
    # the second one finds the rollback budget spent and stops.
    INJECT.update(calls=0, bad=set(range(1, 100)))
    recipe = _recipe(tmp_path, tiny_model_dir, {"actions": {"zero_variance_groups": "rollback"}, "max_rollbacks": 1},
                     preflight={"prompts": 2}, max_steps=6, beta=0.01)
    run = tmp_path / "run"
    summary = train(recipe, run_dir=run).summary

    actions = [h["action"] for h in _lines(run / "health.jsonl") if h["code"] == "zero_variance_groups"]
    assert len(actions) == 2
    assert actions[0].startswith("rollback: restart from the initial model") and "beta 0.01 -> 0.02" in actions[0]
    assert actions[1].startswith("stop (rollback asked, but health.max_rollbacks=1 spent)")
    assert (summary["status"], summary["reason"]) == ("stopped", "health monitor: zero_variance_groups at step 2")
    assert [m["step"] for m in _lines(run / "metrics.jsonl")] == [1, 2]
    assert json.loads((run / "run.json").read_text())["status"] == "stopped"
    # The recipe asked for a preflight: it ran first, into the run directory.
    assert json.loads((run / "preflight.json").read_text())["prompts"] == 2


def test_resume_after_a_rollback_keeps_the_restored_weights_as_kl_reference(tmp_path, tiny_model_dir):
    import torch
    from safetensors.torch import load_file

    from grpokit.training.rollback import load_reference


    INJECT.update(calls=0, bad={3, 4})
    recipe = _recipe(tmp_path, tiny_model_dir, {"actions": {"zero_variance_groups": "rollback"}, "max_rollbacks": 1},
                     max_steps=4)
    run = tmp_path / "run"
    train(recipe, run_dir=run)
    restored = load_file(str(run / "checkpoints" / "checkpoint-1" / "model.safetensors"))
    initial = load_file(str(Path(tiny_model_dir) / "model.safetensors"))
    # checkpoint rotation may delete checkpoint-1 later: reference/ holds its own links
    import shutil
    shutil.rmtree(run / "checkpoints" / "checkpoint-1")
    shutil.rmtree(run / "checkpoints" / "checkpoint-4")  # the resume redoes step 4
    INJECT.update(calls=0, bad=set())
    trainer = train(load_run_recipe(run), run_dir=run, resume=True).trainer
    ref = trainer.ref_model.state_dict()
    name = next(k for k in restored if not torch.equal(restored[k], initial[k]))  # a weight training changed
    assert torch.equal(ref[name], restored[name]) and not torch.equal(ref[name], initial[name])

    # Weights that do not fit the model: where, what, and the fix (not a traceback).
    bad = run / "reference" / "model.safetensors"
    bad.unlink()
    from safetensors.torch import save_file
    save_file({"not.a.weight": torch.zeros(2)}, str(bad))
    with pytest.raises(GrpokitError) as err:
        load_reference(trainer, RunDir(run), log=lambda m: None)
    assert "do not match the model" in str(err.value) and "delete the folder" in str(err.value)
    bad.write_bytes(b"\x00" * 7)  # a file cut short
    with pytest.raises(GrpokitError) as err:
        load_reference(trainer, RunDir(run), log=lambda m: None)
    assert "cannot be loaded" in str(err.value) and "delete the folder" in str(err.value)


def test_a_run_where_every_group_ties_says_nothing_was_learned(tmp_path, tiny_model_dir, capsys):
    """The issue's run: three steps, every group tied (loss 0, grad_norm 0). The terminal, health.jsonl and
    `grpokit doctor` say that nothing was learned, with the fix."""
    from grpokit.cli import main

    INJECT.update(calls=0, bad={1, 2, 3})
    recipe = _recipe(tmp_path, tiny_model_dir, {}, max_steps=3)
    run = tmp_path / "run"
    assert train(recipe, run_dir=run).status == "completed"
    metrics = _lines(run / "metrics.jsonl")
    assert [m["frac_reward_zero_std"] for m in metrics] == [1.0, 1.0, 1.0]
    assert all(m["loss"] == 0 and m["grad_norm"] == 0 for m in metrics)  # the update was empty: beta 0
    found = [h for h in _lines(run / "health.jsonl") if h["code"] == "nothing_learned"]
    assert [(h["step"], h["severity"], h["action"]) for h in found] == [(3, "error", "warn")]
    assert "nothing was learned in steps 1-3" in found[0]["message"]
    out = capsys.readouterr().out
    assert "health error nothing_learned at step 3: nothing was learned in steps 1-3" in out
    assert main(["doctor", str(run)]) == 0
    doctor = capsys.readouterr().out
    assert "nothing_learned" in doctor and "grpokit preflight RECIPE" in doctor
