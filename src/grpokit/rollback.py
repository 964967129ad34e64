"""Health rollbacks: choose the checkpoint to restore, set the bad stretch aside, and continue gentler.

A rollback restores the last complete checkpoint saved before the problem began (checkpoint-N holds the
weights that sampled step N+1, so at most step `since - 2`; none: the initial model), sets the discarded
metrics/samples lines aside in `*.rolled_back.jsonl`, deletes the later checkpoints, halves learning_rate,
doubles beta (0 becomes health.rollback_min_beta, which loads a reference model), writes the new values to
config.yaml and continues; `LearningRateOverride` scales the resumed optimizer to the new rate.

Not covered: deciding that a rollback is due (grpokit.health) and the training loop (grpokit.train).
"""
from __future__ import annotations

from pathlib import Path

from transformers import TrainerCallback

from grpokit.config import Recipe
from grpokit.health import Finding
from grpokit.rundir import RunDir, step_of


def plan_rollback(recipe: Recipe, run: RunDir, finding: Finding, plan: dict) -> str:
    """Choose what a rollback will do (filled into `plan`); the line health.jsonl records as the action."""
    since = finding.since if finding.since is not None else finding.step
    # checkpoint-N holds the weights that sampled step N+1: the last clean weights are at most since - 2.
    clean = [c for c in run.complete_checkpoints() if step_of(c) <= since - 2]
    t = recipe.train
    beta = t.beta * 2 if t.beta > 0 else recipe.health.rollback_min_beta
    plan.update(checkpoint=clean[-1].name if clean else None, step=step_of(clean[-1]) if clean else 0,
                learning_rate=t.learning_rate / 2, beta=beta, old_learning_rate=t.learning_rate, old_beta=t.beta)
    where = f"restore {clean[-1].name}" if clean else "restart from the initial model (no checkpoint before the problem)"
    note = (f", beta {t.beta} -> {beta}" if t.beta > 0 else
            f", beta 0 -> {beta} (beta was 0: a reference model is now loaded, one more copy of the weights)")
    return f"rollback: {where}, learning_rate {t.learning_rate:g} -> {t.learning_rate / 2:g}{note}"


def apply_rollback(recipe: Recipe, run: RunDir, plan: dict, log=print) -> tuple[Recipe, Path | None]:
    keep = plan["step"]
    run.truncate_logs(keep, keep_dropped=True)  # the discarded lines go to *.rolled_back.jsonl
    run.remove_after(keep)
    train_cfg = recipe.train.model_copy(update={"learning_rate": plan["learning_rate"], "beta": plan["beta"]})
    recipe = recipe.model_copy(update={"train": train_cfg})
    run.write_config(recipe)  # --resume continues with the gentler settings
    resume_from = run.checkpoint_path(keep) if plan["checkpoint"] else None
    log(f"health rollback: continuing from {plan['checkpoint'] or 'the initial model'} with "
        f"learning_rate {plan['learning_rate']:g}, beta {plan['beta']:g}")
    return recipe, resume_from


class LearningRateOverride(TrainerCallback):
    """After a rollback the resumed optimizer and scheduler carry the old rate: scale them to the recipe's."""

    def __init__(self, learning_rate: float):
        self.learning_rate = learning_rate

    def on_train_begin(self, args, state, control, optimizer=None, lr_scheduler=None, **kwargs):
        base = list(getattr(lr_scheduler, "base_lrs", None) or [])
        if optimizer is None or not base or not base[0]:
            return
        factor = self.learning_rate / base[0]
        if abs(factor - 1) < 1e-9:
            return
        lr_scheduler.base_lrs = [b * factor for b in base]
        if getattr(lr_scheduler, "_last_lr", None):
            lr_scheduler._last_lr = [x * factor for x in lr_scheduler._last_lr]
        for group in optimizer.param_groups:
            group["lr"] *= factor
            if "initial_lr" in group:
                group["initial_lr"] *= factor
