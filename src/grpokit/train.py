"""Train a recipe with TRL's GRPOTrainer and write a readable run directory.

    grpokit train recipes/smollm2-arithmetic.yaml --set train.max_steps=20
    grpokit train --resume runs/smollm2-arithmetic

The GRPO loop is TRL's; grpokit adds, through callbacks and one small
subclass:
- `config.yaml` (the resolved recipe), `metrics.jsonl` (one object per
  logging step: `step` plus TRL's own key names unchanged), `samples.jsonl`
  (a few completions and their per-reward scores each logging step),
  `run.json` (status, timing, notes) and `checkpoints/checkpoint-N/`;
- a `COMPLETE` marker written into a checkpoint only after the Trainer has
  finished saving it, so `--resume` never picks up a half-written one;
- SIGINT / SIGTERM finish the current step, save a checkpoint and exit
  cleanly (a second Ctrl-C aborts at once);
- a progress line per logging step: step, reward (and each component), kl;
- the health monitor (grpokit.health) after every logging step: findings go
  to `health.jsonl` and the terminal; per code the recipe says warn, stop, or
  rollback. A rollback restores the last complete checkpoint saved before
  the problem began (checkpoint-N holds the weights that sampled step N+1,
  so at most step `since - 2`; none: the initial model), sets the discarded
  metrics/samples lines aside in `*.rolled_back.jsonl`, deletes the later
  checkpoints, halves learning_rate, doubles beta (0 becomes
  health.rollback_min_beta, which loads a reference model), writes the new
  values to config.yaml and continues, at most health.max_rollbacks times.

Not covered here: the detectors themselves (grpokit.health), evaluation of
checkpoints, export (their own modules).
"""
from __future__ import annotations

import json
import math
import shutil
import signal
import time
from pathlib import Path

import torch
from rich.console import Console
from transformers import TrainerCallback

from grpokit.config import Recipe, load_recipe
from grpokit.errors import GrpokitError, Problem
from grpokit.health import Finding, HealthMonitor, read_jsonl
from grpokit.templates import PromptTemplate

console = Console(highlight=False, soft_wrap=True)
COMPLETE_MARKER = "COMPLETE"
CONFIG_FILE = "config.yaml"


# ---------------------------------------------------------------- run directory
def checkpoints_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def complete_checkpoints(run_dir: Path) -> list[Path]:
    """Checkpoints fully written (marker present), oldest first."""
    ckdir = checkpoints_dir(run_dir)
    if not ckdir.is_dir():
        return []
    found = [p for p in ckdir.glob("checkpoint-*") if (p / COMPLETE_MARKER).is_file() and p.name.split("-")[-1].isdigit()]
    return sorted(found, key=lambda p: int(p.name.split("-")[-1]))


def latest_checkpoint(run_dir: Path) -> Path | None:
    done = complete_checkpoints(run_dir)
    return done[-1] if done else None


def _truncate_jsonl(path: Path, max_step: int) -> None:
    """Drop lines logged after `max_step` (they belong to steps the resume will redo)."""
    if not path.is_file():
        return
    kept = [ln for ln in path.read_text().splitlines() if ln.strip() and json.loads(ln).get("step", 0) <= max_step]
    path.write_text("".join(ln + "\n" for ln in kept))


def template_of(recipe: Recipe) -> PromptTemplate:
    return PromptTemplate(recipe.data.template, recipe.data.system_prompt, recipe.model.enable_thinking)


# ---------------------------------------------------------------- data
def build_prompt_dataset(rows: list[dict], template: PromptTemplate, tokenizer, max_prompt_length: int | None):
    """The TRL dataset: each row plus its `prompt`; over-long prompts dropped and counted."""
    from datasets import Dataset

    out, dropped = [], 0
    for row in rows:
        prompt = template.build(row["question"])
        if max_prompt_length and len(template.encode(tokenizer, prompt)) > max_prompt_length:
            dropped += 1
            continue
        out.append({**row, "prompt": prompt})
    if not out:
        raise GrpokitError([Problem("train.max_prompt_length", f"all {len(rows)} prompts are longer than "
                                    f"{max_prompt_length} tokens", "raise train.max_prompt_length")])
    # use_json: a column may hold strings in some rows and message lists in others (questions), which Arrow refuses.
    return Dataset.from_list(out, on_mixed_types="use_json"), dropped


# ---------------------------------------------------------------- TRL config
def grpo_args(recipe: Recipe, run_dir: Path):
    from trl import GRPOConfig

    t = recipe.train
    on_gpu = torch.cuda.is_available()
    return GRPOConfig(
        output_dir=str(checkpoints_dir(run_dir)),
        learning_rate=t.learning_rate, beta=t.beta, num_generations=t.num_generations,
        temperature=t.temperature, top_p=t.top_p, max_completion_length=t.max_completion_length,
        per_device_train_batch_size=t.per_device_train_batch_size,
        gradient_accumulation_steps=t.gradient_accumulation_steps,
        max_steps=t.max_steps, num_train_epochs=t.num_train_epochs, epsilon=t.epsilon, loss_type=t.loss_type,
        scale_rewards=t.scale_rewards, lr_scheduler_type=t.lr_scheduler_type,
        warmup_steps=t.warmup_ratio,  # transformers 5 reads a float in [0, 1) as a ratio of the total steps
        weight_decay=t.weight_decay, max_grad_norm=t.max_grad_norm,
        logging_steps=t.logging_steps, save_strategy="steps", save_steps=t.save_steps,
        save_total_limit=t.save_total_limit, seed=t.seed,
        reward_weights=[r.weight for r in recipe.rewards],
        chat_template_kwargs=template_of(recipe).chat_template_kwargs() or None,
        gradient_checkpointing=recipe.model.gradient_checkpointing,
        bf16=on_gpu and recipe.model.dtype in ("auto", "bfloat16") and torch.cuda.is_bf16_supported(),
        use_cpu=not on_gpu,
        report_to="none", disable_tqdm=True, log_completions=False, remove_unused_columns=False,
        dataloader_num_workers=0,
    )


# ---------------------------------------------------------------- callbacks
class RunLogger(TrainerCallback):
    """metrics.jsonl and the terminal progress line."""

    def __init__(self, run_dir: Path, reward_names: list[str]):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.reward_names = reward_names
        self.t_last = time.time()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "train_runtime" in logs:
            return
        record = {"step": state.global_step, **{k: _jsonable(v) for k, v in logs.items()}}
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        now = time.time()
        per_step = (now - self.t_last) / max(1, args.logging_steps)
        self.t_last = now
        parts = [f"step {state.global_step}/{state.max_steps}"]
        if "reward" in logs:
            comps = ", ".join(f"{n} {_fmt(logs.get(f'rewards/{n}/mean'))}" for n in self.reward_names)
            parts.append(f"reward {_fmt(logs['reward'])} ({comps})")
        if "kl" in logs:
            parts.append(f"kl {_fmt(logs['kl'], 4)}")
        if "completions/mean_length" in logs:
            parts.append(f"len {logs['completions/mean_length']:.1f}")
        parts.append(f"{per_step:.1f}s/step")
        console.print(" | ".join(parts))


class CheckpointMarker(TrainerCallback):
    """Mark a checkpoint complete once the Trainer has finished writing it."""

    def on_save(self, args, state, control, **kwargs):
        ck = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if ck.is_dir():
            (ck / COMPLETE_MARKER).write_text(json.dumps({"step": state.global_step, "time": time.time()}))


class GracefulStop(TrainerCallback):
    """SIGINT/SIGTERM: finish the step, save, stop. A second SIGINT aborts."""

    def __init__(self):
        self.requested: str | None = None
        self._previous = {}

    def install(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.getsignal(sig)
            signal.signal(sig, self._handle)

    def uninstall(self):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum, frame):
        if self.requested is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = signal.Signals(signum).name
        console.print(f"[yellow]{self.requested}: finishing this step, saving a checkpoint, then stopping "
                      "(Ctrl-C again to abort without saving)[/]")

    def on_step_end(self, args, state, control, **kwargs):
        if self.requested:
            control.should_save = True
            control.should_training_stop = True


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


def _fmt(v, digits=3):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def _jsonable(v):
    if isinstance(v, torch.Tensor):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else str(v)
    return v


def _trainer_class():
    from grpokit import trl_adapter
    from grpokit.no_signal import SkipNoSignalRows

    class GrpokitTrainer(SkipNoSignalRows, trl_adapter.trainer_base()):
        """GRPOTrainer that writes samples.jsonl, runs the health monitor at each logging step and (when the
        recipe's train.skip_no_signal holds) trains on the completions with a learning signal only."""

        samples_path: Path | None = None
        num_samples_logged: int = 4
        health: HealthMonitor | None = None

        def log(self, logs, start_time=None):
            super().log(logs, start_time)
            if "train_runtime" in logs:
                return
            samples = self._write_samples()
            if self.health is not None:
                record = {"step": self.state.global_step, **{k: _jsonable(v) for k, v in logs.items()}}
                if self.health.observe(record, samples) is not None:
                    self.control.should_training_stop = True

        def _write_samples(self) -> list[dict]:
            if self.samples_path is None or not self.num_samples_logged:
                return []
            prompts, completions, rewards = trl_adapter.latest_generation(self)
            if not completions:
                return []
            g = self.args.num_generations
            # One completion from each of several groups: different prompts are more telling than one group.
            idx = list(range(0, len(completions), g))[: self.num_samples_logged]
            idx += [i for i in range(len(completions)) if i not in idx][: self.num_samples_logged - len(idx)]
            written = [{"step": self.state.global_step, "prompt": prompts[i], "completion": completions[i],
                        "rewards": {k: _jsonable(v[i]) for k, v in rewards.items() if i < len(v)}} for i in idx]
            with self.samples_path.open("a") as f:
                for line in written:
                    f.write(json.dumps(line, ensure_ascii=False) + "\n")
            return written

    return GrpokitTrainer


# ---------------------------------------------------------------- entry points
def prepare_run_dir(recipe: Recipe, run_dir: Path, overwrite: bool) -> None:
    if run_dir.exists() and any(run_dir.iterdir()):
        if not overwrite:
            raise GrpokitError([Problem(str(run_dir), "run directory already exists and is not empty",
                                        f"continue it with `grpokit train --resume {run_dir}`, pick another "
                                        "--output-dir, or pass --overwrite to start again")])
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / CONFIG_FILE).write_text(recipe.to_yaml())


def load_run_recipe(run_dir: Path) -> Recipe:
    path = Path(run_dir) / CONFIG_FILE
    if not path.is_file():
        raise GrpokitError([Problem(str(run_dir), f"not a grpokit run directory (no {CONFIG_FILE})",
                                    "pass the output_dir of an earlier `grpokit train`")])
    # config.yaml is written with absolute data paths, so --resume works from any directory.
    return load_recipe(path)


def _resolved(recipe: Recipe, run_dir: Path) -> Recipe:
    """The recipe as written to the run dir: absolute data paths, the actual output_dir."""
    data = recipe.data.model_copy(update={
        k: (recipe.resolve_data_path(v) if v else v) for k, v in (("train", recipe.data.train), ("eval", recipe.data.eval))
    })
    return recipe.model_copy(update={"data": data, "output_dir": str(run_dir)})


def train(recipe: Recipe, *, run_dir: Path | None = None, resume: bool = False, overwrite: bool = False,
          model=None, tokenizer=None) -> dict:
    """Run GRPO for a recipe (with health rollbacks); returns the run summary written to run.json."""
    from grpokit import models
    from grpokit.data import load_datasets
    from grpokit.rewards import build_reward

    run_dir = Path(run_dir or recipe.output_dir).resolve()
    resume_from = None
    if resume:
        resume_from = latest_checkpoint(run_dir)
        if resume_from is None:
            console.print(f"[yellow]no complete checkpoint in {run_dir}; starting from step 0[/]")
        step0 = _step_of(resume_from) if resume_from else 0
        for name in ("metrics.jsonl", "samples.jsonl"):
            _truncate_jsonl(run_dir / name, step0)
    else:
        recipe = _resolved(recipe, run_dir)
        prepare_run_dir(recipe, run_dir, overwrite)

    if recipe.train.torch_threads:
        torch.set_num_threads(recipe.train.torch_threads)
    template = template_of(recipe)
    train_rows, eval_rows, notes = load_datasets(recipe)
    model_path = models.resolve_model_path(recipe.model.name)
    tokenizer = tokenizer or models.load_tokenizer(model_path)
    model = model or models.load_model(model_path, recipe.model.dtype)
    dataset, dropped = build_prompt_dataset(train_rows, template, tokenizer, recipe.train.max_prompt_length)
    if dropped:
        notes.append(f"dropped {dropped} prompt(s) longer than train.max_prompt_length={recipe.train.max_prompt_length}")
    for n in notes:
        console.print(f"[yellow]note:[/] {n}")
    if not resume and recipe.preflight.prompts:
        _preflight_warnings(recipe, run_dir, model, tokenizer, train_rows)

    reward_funcs = [build_reward(r.name, r.params) for r in recipe.rewards]
    summary = {"run_dir": str(run_dir), "model": recipe.model.name, "train_rows": len(dataset),
               "eval_rows": len(eval_rows), "notes": notes, "status": "running",
               "resumed_from": str(resume_from) if resume_from else None, "rollbacks": []}
    rollbacks_done = sum(1 for x in read_jsonl(run_dir / "health.jsonl") if str(x.get("action", "")).startswith("rollback"))
    t0 = time.time()
    while True:
        stopper = GracefulStop()
        plan: dict = {}
        monitor = None
        if recipe.health.enabled:
            monitor = HealthMonitor(recipe.health, run_dir, [r.name for r in recipe.rewards],
                                    recipe.health.max_rollbacks - rollbacks_done,
                                    plan_rollback=lambda f: _plan_rollback(recipe, run_dir, f, plan),
                                    printer=lambda line: console.print(f"[yellow]{line}[/]"))
        trainer = _trainer_class()(
            model=model, reward_funcs=reward_funcs, args=grpo_args(recipe, run_dir), train_dataset=dataset,
            processing_class=tokenizer, peft_config=models.peft_config(recipe.model.lora),
            callbacks=[RunLogger(run_dir, [r.name for r in recipe.rewards]), CheckpointMarker(), stopper,
                       LearningRateOverride(recipe.train.learning_rate)],
        )
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)  # RunLogger prints a compact line instead of the raw dict
        trainer.samples_path = run_dir / "samples.jsonl"
        trainer.num_samples_logged = recipe.train.num_samples_logged
        trainer.health = monitor
        trainer.skip_no_signal = recipe.train.skip_no_signal
        _write_run_json(run_dir, summary)
        console.print(f"training {recipe.model.name} on {len(dataset)} prompts -> {run_dir}"
                      + (f" (resuming from {resume_from.name})" if resume_from else ""))
        stopper.install()
        try:
            trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
        except KeyboardInterrupt:
            summary.update(status="aborted", seconds=round(time.time() - t0, 1), step=trainer.state.global_step)
            _write_run_json(run_dir, summary)
            raise
        finally:
            stopper.uninstall()
        decision = monitor.decision if monitor else None
        if stopper.requested or decision is None or decision.action != "rollback" or not plan:
            break
        # Rollback: the bad stretch is set aside, training continues from before it with gentler settings.
        rollbacks_done += 1
        recipe, resume_from = _apply_rollback(recipe, run_dir, plan)
        summary["rollbacks"].append({"code": decision.finding.code, "at_step": decision.finding.step,
                                     "restored": plan["checkpoint"], "learning_rate": plan["learning_rate"],
                                     "beta": plan["beta"]})
        del trainer
        model = models.load_model(model_path, recipe.model.dtype)  # fresh weights; resume loads the checkpoint's
    if stopper.requested:
        status = f"interrupted ({stopper.requested})"
    elif decision is not None:
        status = f"stopped by health monitor ({decision.finding.code} at step {decision.finding.step})"
    else:
        status = "completed"
    summary.update(status=status, seconds=round(time.time() - t0, 1), step=trainer.state.global_step,
                   reward_errors={f.name: f.errors for f in reward_funcs},
                   last_checkpoint=str(latest_checkpoint(run_dir)) if latest_checkpoint(run_dir) else None)
    _write_run_json(run_dir, summary)
    console.print(f"{status} at step {trainer.state.global_step} in {summary['seconds']:.0f}s; "
                  f"last checkpoint: {summary['last_checkpoint']}")
    if stopper.requested:
        console.print(f"continue with: grpokit train --resume {run_dir}")
    elif decision is not None:
        console.print(f"see {run_dir / 'health.jsonl'} (or `grpokit doctor {run_dir}`) for the finding and its fix")
    summary["trainer"] = trainer  # for in-process callers (demo); not written to disk
    return summary


# ---------------------------------------------------------------- health rollback
def _step_of(checkpoint: Path) -> int:
    return int(checkpoint.name.split("-")[-1])


def _plan_rollback(recipe: Recipe, run_dir: Path, finding: Finding, plan: dict) -> str:
    """Choose what a rollback will do (filled into `plan`); the line health.jsonl records as the action."""
    since = finding.since if finding.since is not None else finding.step
    # checkpoint-N holds the weights that sampled step N+1: the last clean weights are at most since - 2.
    clean = [c for c in complete_checkpoints(run_dir) if _step_of(c) <= since - 2]
    t = recipe.train
    beta = t.beta * 2 if t.beta > 0 else recipe.health.rollback_min_beta
    plan.update(checkpoint=clean[-1].name if clean else None, step=_step_of(clean[-1]) if clean else 0,
                learning_rate=t.learning_rate / 2, beta=beta, old_learning_rate=t.learning_rate, old_beta=t.beta)
    where = f"restore {clean[-1].name}" if clean else "restart from the initial model (no checkpoint before the problem)"
    note = (f", beta {t.beta} -> {beta}" if t.beta > 0 else
            f", beta 0 -> {beta} (beta was 0: a reference model is now loaded, one more copy of the weights)")
    return f"rollback: {where}, learning_rate {t.learning_rate:g} -> {t.learning_rate / 2:g}{note}"


def _apply_rollback(recipe: Recipe, run_dir: Path, plan: dict) -> tuple[Recipe, Path | None]:
    keep = plan["step"]
    for name in ("metrics.jsonl", "samples.jsonl"):
        path = run_dir / name
        lines = [ln for ln in path.read_text().splitlines() if ln.strip()] if path.is_file() else []
        dropped = [ln for ln in lines if json.loads(ln).get("step", 0) > keep]
        if dropped:
            with (run_dir / name.replace(".jsonl", ".rolled_back.jsonl")).open("a") as f:
                f.writelines(ln + "\n" for ln in dropped)
        _truncate_jsonl(path, keep)
    for ck in checkpoints_dir(run_dir).glob("checkpoint-*"):
        if ck.name.split("-")[-1].isdigit() and _step_of(ck) > keep:
            shutil.rmtree(ck)
    train_cfg = recipe.train.model_copy(update={"learning_rate": plan["learning_rate"], "beta": plan["beta"]})
    recipe = recipe.model_copy(update={"train": train_cfg})
    (run_dir / CONFIG_FILE).write_text(recipe.to_yaml())  # --resume continues with the gentler settings
    resume_from = checkpoints_dir(run_dir) / plan["checkpoint"] if plan["checkpoint"] else None
    console.print(f"[yellow]health rollback: continuing from {plan['checkpoint'] or 'the initial model'} with "
                  f"learning_rate {plan['learning_rate']:g}, beta {plan['beta']:g}[/]")
    return recipe, resume_from


def _preflight_warnings(recipe: Recipe, run_dir: Path, model, tokenizer, rows: list[dict]) -> None:
    from grpokit.preflight import run_preflight

    report = run_preflight(recipe, model, tokenizer, rows, prompts=recipe.preflight.prompts,
                           generations=recipe.preflight.generations, out_dir=run_dir)
    for rec in report["recommendations"]:
        console.print(f"[yellow]preflight:[/] {rec['setting']}: {rec['reason']}")


def _write_run_json(run_dir: Path, summary: dict) -> None:
    data = {k: v for k, v in summary.items() if k != "trainer"}
    (Path(run_dir) / "run.json").write_text(json.dumps(data, indent=2))


__all__ = ["train", "load_run_recipe", "latest_checkpoint", "complete_checkpoints", "template_of"]
