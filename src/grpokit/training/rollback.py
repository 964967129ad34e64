"""Health rollbacks: choose the checkpoint to restore, set the bad stretch aside, and continue gentler.

A rollback restores the last complete checkpoint saved before the problem began (checkpoint-N holds the
weights that sampled step N+1, so at most step `since - 2`; none: the initial model), or, where the held-out probe
scored those weights, the one of them it scored best (grpokit.health.best_probed: an earlier checkpoint or the
initial model when the probe saw the run lose before the finding), or, for a finding that measured the weights it
trusts (the held-out probe's best step, `Finding.restore`), that step's checkpoint (the newest complete one at or
before it when rotation removed it; grpokit.training.probe keeps it), sets the discarded
metrics/samples lines aside in `*.rolled_back.jsonl`, deletes the later checkpoints, halves learning_rate,
doubles beta (0 becomes health.rollback_min_beta, which loads a reference model), writes the new values to
config.yaml and continues; `LearningRateOverride` scales the resumed optimizer to the new rate.

The KL reference after a rollback is the restored checkpoint, not the initial model (TRL's default): the
raised beta is there to keep the policy near the weights it restarts from. Measured against the initial
model instead, kl right after the demo recipe's rollbacks was already past the kl_spike bound (the policy had
trained steps away from it) and the penalty pulled towards the untrained model (docs/measurements.md "Health and
rollback", benchmarks/rollback_effect.py). The restored weights are hard-linked into the run's `reference/` (a later
checkpoint rotation cannot delete them; a later --resume uses them too). LoRA runs keep the initial model
as reference: TRL computes it by switching the adapter off, there is no second model to load into.

`Rollbacks` is the one object the training loop consults: it builds each attempt's health monitor (with the
rollbacks left), and after each `trainer.train()` says whether to go again, from where, with which recipe.

Not covered: deciding that a rollback is due (grpokit.health) and the training loop (grpokit.training).
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from rich.markup import escape
from transformers import TrainerCallback

from grpokit import hf_internals, internals
from grpokit.distributed import broadcast, is_main_process
from grpokit.errors import GrpokitError, Problem
from grpokit.health import Finding, HealthMonitor, best_probed, reward_weights
from grpokit.recipe import Recipe
from grpokit.run import RunDir, step_of, torch_state_damage
from grpokit.run.writer import make_folder, move, remove


class Rollbacks:
    """The health rollbacks of one run: at most health.max_rollbacks in all, counting those health.jsonl already
    records (a resumed run does not get a fresh allowance). `monitor` builds an attempt's health monitor;
    `after` is consulted once when trainer.train() returns. The main process decides; every rank gets the
    decision, the plan and the gentler recipe."""

    def __init__(self, run: RunDir, printer):
        self.run, self.printer = run, printer
        self.done = sum(1 for x in run.read_health() if str(x.get("action", "")).startswith("rollback"))
        self.plan: dict = {}
        self.decision = None  # the monitor's last decision (warn-only runs: None); a stop is the run's end reason
        self.history: list[dict] = []  # run.json's `rollbacks`

    def monitor(self, recipe: Recipe, roles: dict[str, str], probe=None) -> HealthMonitor | None:
        """This attempt's health monitor (main process only; None when health is off), its rollback plan bound here;
        `probe` (grpokit.training.probe.HeldOutProbe) confirms a finding read on the drawn prompts before acting."""
        self.plan = {}
        if not recipe.health.enabled or not is_main_process():
            return None
        return HealthMonitor(recipe.health, self.run.path, roles, recipe.health.max_rollbacks - self.done,
                             plan_rollback=lambda f: plan_rollback(recipe, self.run, f, self.plan),
                             printer=lambda line: self.printer(f"[yellow]{escape(line)}[/]"),  # [code]: text
                             weights=reward_weights(recipe.rewards), probe=probe.confirm if probe else None)

    def after(self, recipe: Recipe, monitor: HealthMonitor | None, stopped: bool) -> tuple[Recipe, Path | None] | None:
        """When trainer.train() returned: (gentler recipe, checkpoint to resume) if a rollback is due, else None.
        A user's stop (Ctrl-C, SIGTERM) always ends the run, whatever the monitor decided."""
        self.decision, plan = broadcast((monitor.decision if monitor else None, self.plan))
        if stopped or self.decision is None or self.decision.action != "rollback" or not plan:
            return None
        self.done += 1
        resume_from = None
        if is_main_process():  # the bad stretch is set aside; the others wait until the files are moved
            recipe, resume_from = apply_rollback(recipe, self.run, plan, log=lambda m: self.printer(f"[yellow]{m}[/]"))
        recipe, resume_from = broadcast((recipe, resume_from))
        self.history.append({"code": self.decision.finding.code, "at_step": self.decision.finding.step,
                             "restored": plan["checkpoint"], "learning_rate": plan["learning_rate"],
                             "beta": plan["beta"]})
        return recipe, resume_from


def plan_rollback(recipe: Recipe, run: RunDir, finding: Finding, plan: dict) -> str:
    """Choose what a rollback will do (filled into `plan`); the line health.jsonl records as the action."""
    since = finding.since if finding.since is not None else finding.step
    # checkpoint-N holds the weights that sampled step N+1: the last clean weights are at most since - 2, unless
    # the finding measured the weights themselves (the probe's best step).
    limit = finding.restore if finding.restore is not None else since - 2
    clean = [c for c in run.complete_checkpoints() if step_of(c) <= limit]
    # A checkpoint the trainer could not resume from (an optimizer.pt or rng_state.pth of another kind: torch's
    # refusal, which tells a user to turn its safety check off) is passed over, said in the action's line.
    damage = {c.name: torch_state_damage(c) for c in clean}
    passed = "".join(f"; {name} passed over: {why}" for name, why in damage.items() if why)
    clean = [c for c in clean if not damage[c.name]]
    if finding.restore is None:
        clean, why = probe_prefers(run, clean)
    else:
        why = ""
    where = (f"restore {clean[-1].name}" if clean else "restart from the initial model") + (
        why or ("" if clean else " (no checkpoint before the problem)")) + passed
    t = recipe.train
    beta = t.beta * 2 if t.beta > 0 else recipe.health.rollback_min_beta
    plan.update(checkpoint=clean[-1].name if clean else None, step=step_of(clean[-1]) if clean else 0,
                learning_rate=t.learning_rate / 2, beta=beta, old_learning_rate=t.learning_rate, old_beta=t.beta)
    note = (f", beta {t.beta} -> {beta}" if t.beta > 0 else
            f", beta 0 -> {beta} (beta was 0: a reference model is now loaded, one more copy of the weights)")
    return f"rollback: {where}, learning_rate {t.learning_rate:g} -> {t.learning_rate / 2:g}{note}"


def probe_prefers(run: RunDir, clean: list[Path]) -> tuple[list[Path], str]:
    """`clean` (the checkpoints a rollback may restore, oldest first) cut after the weights the held-out probe scored
    best among them and the initial model, and the readings that chose, for the log line; unchanged ("") where the
    probe did not score the newest on the same rows (a checkpoint a signal saved, one from before the probe: nothing
    says it is worse) or scored it best."""
    newest = step_of(clean[-1]) if clean else 0
    chosen = best_probed(run.read_metrics(), [0, *map(step_of, clean)])
    if chosen is None or newest not in chosen[1] or chosen[0] == newest:
        return clean, ""
    best, readings = chosen
    scored = ", ".join(f"{100 * v:.1f}% at step {st}" for st, v in sorted(readings.items()))
    return [c for c in clean if step_of(c) <= best], f" (the held-out probe's best of the weights before the problem: {scored})"


def apply_rollback(recipe: Recipe, run: RunDir, plan: dict, log=print) -> tuple[Recipe, Path | None]:
    keep = plan["step"]
    # Not while an evaluation reads the checkpoints this removes (it would score, and choose as best, steps that
    # are gone): refused before anything changes, the run resumable as it is.
    with run.evaluation_lock("health rollback", f"wait for that evaluation of {run.path} to finish, then "
                                                 f"`grpokit train --resume {run.path}`"):
        run.truncate_logs(keep, keep_dropped=True)  # the discarded lines go to *.rolled_back.jsonl
        run.remove_after(keep)
    train_cfg = recipe.train.model_copy(update={"learning_rate": plan["learning_rate"], "beta": plan["beta"]})
    recipe = recipe.model_copy(update={"train": train_cfg})
    run.write_config(recipe)  # --resume continues with the gentler settings
    resume_from = run.checkpoint_path(keep) if plan["checkpoint"] else None
    set_reference(run, resume_from)
    log(f"health rollback: continuing from {plan['checkpoint'] or 'the initial model'} with "
        f"learning_rate {plan['learning_rate']:g}, beta {plan['beta']:g}")
    return recipe, resume_from


def _weight_files(folder: Path) -> list[Path]:
    """A full model's safetensors files (one, or the shards and their index); none for a LoRA adapter."""
    return sorted(p for p in folder.glob("model*.safetensors*") if p.name.endswith((".safetensors", ".index.json")))


def set_reference(run: RunDir, checkpoint: Path | None) -> None:
    """reference/ = hard links to `checkpoint`'s weight files (copies where links fail); None: the initial model."""
    remove(run.reference_dir)
    files = _weight_files(checkpoint) if checkpoint is not None else []
    if not files:
        return
    tmp = run.reference_dir.with_name(run.reference_dir.name + ".tmp")
    remove(tmp)
    make_folder(tmp, within=run.path)
    for f in files:
        try:
            os.link(f, tmp / f.name)
        except OSError:  # another file system, or links not allowed
            shutil.copy2(f, tmp / f.name)
    move(tmp, run.reference_dir, within=run.path)  # whole or absent: a crash leaves no half reference


def load_reference(trainer, run: RunDir, log=print) -> bool:
    """Load reference/ into the trainer's reference model (beta > 0, full fine-tuning); True when it did."""
    ref = internals.reference_model(trainer)
    files = [f for f in _weight_files(run.reference_dir) if f.suffix == ".safetensors"]
    if ref is None or not files:
        return False
    if hf_internals.reference_is_sharded(trainer):
        log("the KL reference stays the initial model: its weights are sharded (FSDP / ZeRO-3) and "
            f"{run.reference_dir} holds whole tensors")
        return False
    from safetensors.torch import load_file  # only a rollback with a KL reference reads one


    def bad(what: str) -> GrpokitError:
        return GrpokitError([Problem(str(run.reference_dir), f"the KL reference weights {what}",
                                     "delete the folder (KL is then measured against the initial model) and "
                                     "resume with `grpokit train --resume RUN_DIR`")])

    own, state = ref.state_dict(), {}
    try:
        for f in files:
            state.update(load_file(str(f)))
        missing, unexpected = ref.load_state_dict(state, strict=False)
    except Exception as e:  # a file cut short, or tensors of another shape
        raise bad(f"cannot be loaded ({str(e).splitlines()[0]})") from None
    # A tied weight (lm_head = embed_tokens) is saved once: it is loaded through the tensor it shares.
    loaded = {own[k].data_ptr() for k in state if k in own}
    untied = [k for k in missing if own[k].data_ptr() not in loaded]
    if unexpected or untied:
        raise bad(f"do not match the model (missing {untied[:3]}, unexpected {list(unexpected)[:3]})")
    log(f"KL reference: the weights restored by the rollback ({run.reference_dir})")
    return True


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
        hf_internals.scale_learning_rate(optimizer, lr_scheduler, factor)
