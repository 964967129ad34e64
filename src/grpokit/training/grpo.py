"""Train a recipe with TRL's GRPOTrainer and write a readable run directory.

    grpokit train recipes/smollm2-arithmetic.yaml --set train.max_steps=20
    grpokit train --resume runs/smollm2-arithmetic

The GRPO loop is TRL's; grpokit adds, through callbacks and one subclass:
- the run directory (grpokit.run: config.yaml, run.json, metrics.jsonl,
  samples.jsonl, checkpoints with a COMPLETE marker, one writer's lock);
  any exception ends as run.json `failed` + `error:`/`fix:` (grpokit.run.safety);
- SIGINT / SIGTERM finish the current step, save a checkpoint and exit
  cleanly (a second Ctrl-C aborts at once);
- a metrics line per logging step (step, reward and each component, kl, length, s/step) under a rich
  progress bar with ETA on a terminal, or ending with the ETA in a log (grpokit.training.tracking);
- trackers named in the recipe's `trl.report_to` (tensorboard event files go to `tensorboard/`);
- the health monitor (grpokit.health) after every logging step: findings go
  to `health.jsonl` and the terminal; per code the recipe says warn, stop, or
  rollback (grpokit.training.rollback: restore the last checkpoint before the
  problem, halve learning_rate, double beta, continue; at most
  health.max_rollbacks times).

The GRPOConfig and the prompt dataset are the recipe's (grpokit.recipe.trl_args). Not covered here: the
detectors (grpokit.health), prompt selection and refill (grpokit.training.selection, .refill),
evaluation, export (their own packages).
"""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import torch

from grpokit import internals, models
from grpokit.console import console
from grpokit.data import load_datasets
from grpokit.distributed import barrier, broadcast, is_main_process
from grpokit.envs import tool_setup
from grpokit.errors import GrpokitError, Problem
from grpokit.generation import warpers
from grpokit.health import HealthMonitor
from grpokit.recipe import Recipe, build_prompt_dataset, grpo_args, load_run_recipe, refuse_vllm_training_here
from grpokit.run import RunDir, disk_space_guard, fail_run, jsonable, step_of, writable_problem
from grpokit.task import Task
from grpokit.training.callbacks import CheckpointMarker, GracefulStop, RunLogger
from grpokit.training.no_signal import SkipNoSignalRows
from grpokit.training.refill import SignalAware
from grpokit.training.rollback import LearningRateOverride, apply_rollback, load_reference, plan_rollback
from grpokit.training.tracking import Progress, route_trackers


def _trainer_class():
    class GrpokitTrainer(SkipNoSignalRows, SignalAware, internals.trainer_base()):
        """GRPOTrainer that writes samples.jsonl, runs the health monitor at each logging step, trains on the
        completions with a learning signal only (train.skip_no_signal) and chooses prompts (grpokit.training.refill)."""

        samples_path: Path | None = None
        num_samples_logged: int = 4
        health: HealthMonitor | None = None

        def log(self, logs, start_time=None):
            super().log(logs, start_time)
            if "train_runtime" in logs:
                return
            samples = self._write_samples()
            stop = False
            if self.health is not None:  # set on the main process only
                record = {"step": self.state.global_step, **{k: jsonable(v) for k, v in logs.items()}}
                stop = self.health.observe(record, samples) is not None
            if broadcast(stop):  # the main process's decision stops every rank at this step
                self.control.should_training_stop = True

        def _write_samples(self) -> list[dict]:
            if self.samples_path is None or not self.num_samples_logged or not self.accelerator.is_main_process:
                return []
            prompts, completions, rewards = internals.latest_generation(self)
            if not completions:
                return []
            g = self.args.num_generations
            # One completion from each of several groups: different prompts are more telling than one group.
            idx = list(range(0, len(completions), g))[: self.num_samples_logged]
            idx += [i for i in range(len(completions)) if i not in idx][: self.num_samples_logged - len(idx)]
            written = [{"step": self.state.global_step, "prompt": prompts[i], "completion": completions[i],
                        "rewards": {k: jsonable(v[i]) for k, v in rewards.items() if i < len(v)}} for i in idx]
            with self.samples_path.open("a") as f:
                for line in written:
                    f.write(json.dumps(line, ensure_ascii=False) + "\n")
            return written

    return GrpokitTrainer


# ---------------------------------------------------------------- entry points
# ---------------------------------------------------------------- entry points
def _note(line: str) -> None:
    console.print(f"[yellow]note:[/] {line}")


def train(recipe: Recipe, *, run_dir: Path | None = None, resume: bool = False, overwrite: bool = False,
          model=None, tokenizer=None, init_from: dict | None = None, callbacks: list | None = None, kind: str = "run") -> dict:
    """Run GRPO for a recipe (with health rollbacks); returns the run summary written to run.json.
    `init_from` (grpokit.training.lineage's record of --init-from) is kept in run.json. `callbacks`: further
    transformers TrainerCallbacks, after grpokit's own (the benchmarks' step clocks and time budgets).

    Holds the run's lock throughout: a second writer (--resume, --overwrite) is refused. A new run's folder is
    created only once data, model and rewards have loaded; any exception after training starts is recorded
    in run.json as `failed` and raised as a GrpokitError with the way to continue.
    """
    chosen = recipe.output_dir if run_dir is None else run_dir
    if not str(chosen).strip():  # '' would be the current folder: refused, never trained into (or cleared)
        raise GrpokitError([Problem("--output-dir" if run_dir is not None else f"{recipe.source or 'recipe'} output_dir",
                                    "is empty (it would mean the current folder)",
                                    "name a new folder for the run, e.g. runs/my-run")])
    run = RunDir(Path(chosen).resolve(), kind)  # kind: the record's, "demo" for grpokit demo
    # Before anything loads (TRL would fail only at the first weight sync): vLLM training without CUDA.
    refuse_vllm_training_here(recipe.generation, str(run.config if resume else recipe.source or "recipe"))
    held: list = []  # the lock, once taken (here, or by _train when a new run's folder is created)
    main = is_main_process()  # with N processes (grpokit.training.launch) the main one alone writes the run directory
    if resume:
        recorded = load_run_recipe(run)  # a clear error when this is no run directory
        finished = None
        if main:
            problem = writable_problem(run.path)
            if problem:
                raise GrpokitError([problem])
            held.append(run.lock(note=_note).acquire())
            try:
                finished = _finished(recipe, run)
            except BaseException:
                held.pop().release()
                raise
        finished = broadcast(finished)  # every rank ends here when the run is finished, not only the main one
        if finished is not None:  # a finished run stays finished: nothing loads, nothing is written
            for lock in held:
                lock.release()
            return finished
        if main and recipe.train.max_steps != recorded.train.max_steps:  # --set train.max_steps=N: recorded
            run.write_config(recipe)
    else:
        recipe = recipe.for_run(run.path)
        if main:
            run.refuse_existing(overwrite, keep=_read_paths(recipe))
        if main and overwrite and run.path.is_dir():
            held.append(run.lock(note=_note).acquire())  # refuse now, before another process's live run is touched
    try:
        return _train(recipe, run, resume, overwrite, model, tokenizer, held, init_from, callbacks)
    finally:
        for lock in held:
            lock.release()


def _read_paths(recipe: Recipe) -> list[str]:
    """Files the run reads (recipe, data, a local model): a folder holding one is never cleared by --overwrite."""
    paths = [recipe.source, recipe.data.train, recipe.data.eval, recipe.model.name]
    return [p for p in paths if p and not str(p).startswith("hf:") and Path(p).exists()]


def _finished(recipe: Recipe, run: RunDir) -> dict | None:
    """The summary of a run that already reached its end (say so; nothing to train), or None to continue.

    The end is train.max_steps (raised with `--resume RUN --set train.max_steps=N` to continue), measured by the
    newest complete checkpoint; without max_steps (epochs) it is the status `completed`. A missing or corrupt
    run.json is rebuilt first (grpokit.run.RunDir.repair_status), so it never opens a finished run again.
    """
    status = run.repair_status(note=_note)
    # Measured by the checkpoint a resume would start from: a damaged last one is redone, not "finished".
    step, _ = run.checkpoint_progress(run.resume_checkpoint(note=lambda _: None))
    target = recipe.train.max_steps
    done = step >= target if target > 0 else status.get("status") == "completed"
    if not done:
        return None
    end = f"train.max_steps={target}" if target > 0 else "the end of its epochs"
    console.print(f"{run.path}: finished at step {step} ({end}; status {status.get('status')}): nothing to resume, "
                  "nothing trained")
    console.print(f"to train longer: grpokit train --resume {run.path} --set train.max_steps=N (N above {step})")
    return {**status, "run_dir": str(run.path), "step": step, "finished": True}


def _train(recipe: Recipe, run: RunDir, resume: bool, overwrite: bool, model, tokenizer, held: list,
           init_from: dict | None = None, extra_callbacks: list | None = None) -> dict:
    run_dir = run.path
    resume_from = None
    if resume:
        resume_from = run.resume_checkpoint(note=_note)
        if resume_from is None:
            console.print(f"[yellow]no complete checkpoint in {run_dir}; starting from step 0[/]")
        step0 = step_of(resume_from) if resume_from else 0
        if is_main_process():
            run.set_aside_incomplete()
            run.set_aside_after(step0)  # the steps after it are redone; so are their metrics and samples
            run.truncate_logs(step0)

    if recipe.train.torch_threads:
        torch.set_num_threads(recipe.train.torch_threads)
    task = Task.from_recipe(recipe)  # rewards built (and own reward functions imported) before any model loads
    template = task.template
    train_rows, eval_rows, notes = load_datasets(recipe)
    model_path = models.resolve_model_path(recipe.model.name)
    tokenizer = tokenizer or models.load_tokenizer(model_path)
    model = model or models.load_model(model_path, recipe.model.dtype, recipe.model.init_kwargs)
    train_rows, tool_kwargs = tool_setup(recipe, tokenizer, train_rows)  # grpokit.envs; ({} unless env:)
    dataset, dropped = build_prompt_dataset(train_rows, template, tokenizer, recipe.train.max_prompt_length)
    if dropped:
        notes.append(f"dropped {dropped} prompt(s) longer than train.max_prompt_length={recipe.train.max_prompt_length}")
    reward_funcs = [r.fn for r in task.rewards]
    created = False
    if not resume and is_main_process():  # everything loaded: only now does the run get a folder
        lock, created = run.open_new(recipe, overwrite, held[0] if held else None, note=_note)
        held[:] = [lock]
    barrier()  # the folder exists (and a resume's clean-up is done) before any rank trains
    for n in notes:
        console.print(f"[yellow]note:[/] {n}")
    summary = {"run_dir": str(run_dir), "model": recipe.model.name, "train_rows": len(dataset),
               "eval_rows": len(eval_rows), "notes": notes, "status": "running",
               "resumed_from": str(resume_from) if resume_from else None, "rollbacks": [], "init_from": init_from}
    rollbacks_done = sum(1 for x in run.read_health() if str(x.get("action", "")).startswith("rollback"))
    t0, trainer, guard = time.time(), None, disk_space_guard(run, _note)
    try:
        if not resume and recipe.preflight.prompts and is_main_process():
            _preflight_warnings(recipe, run_dir, model, tokenizer, train_rows)
        while True:
            stopper = GracefulStop()
            plan: dict = {}
            monitor = None
            if recipe.health.enabled and is_main_process():
                monitor = HealthMonitor(recipe.health, run_dir, task.roles,
                                        recipe.health.max_rollbacks - rollbacks_done,
                                        plan_rollback=lambda f: plan_rollback(recipe, run, f, plan),
                                        printer=lambda line: console.print(f"[yellow]{line}[/]"))
            progress = Progress(console)
            trainer = _trainer_class()(
                model=model, reward_funcs=reward_funcs, args=grpo_args(recipe, run_dir), train_dataset=dataset,
                processing_class=tokenizer, peft_config=models.peft_config(recipe.model.lora),
                callbacks=[progress, RunLogger(run_dir, list(task.roles), progress),
                           CheckpointMarker(run), stopper, LearningRateOverride(recipe.train.learning_rate), guard,
                           *(extra_callbacks or [])],
                **tool_kwargs,
            )
            from transformers.trainer_callback import PrinterCallback

            trainer.remove_callback(PrinterCallback)  # RunLogger prints a compact line instead of the raw dict
            route_trackers(trainer, run_dir)
            trainer.samples_path = run.samples
            trainer.num_samples_logged = recipe.train.num_samples_logged
            trainer.health = monitor
            trainer.skip_no_signal = recipe.train.skip_no_signal
            trainer.attach_selection(recipe, dataset, run.preflight_file)  # pass rates, selection, refill
            load_reference(trainer, run, log=_note)  # after a health rollback: KL against the restored weights
            _generation_settings(trainer, recipe)
            run.write_status(summary)
            created = False  # from here on the run exists: a failure is recorded in it, not cleaned away
            console.print(f"training {recipe.model.name} on {len(dataset)} prompts -> {run_dir}"
                          + (f" (resuming from {resume_from.name})" if resume_from else "")
                          + (", bf16 autocast" if trainer.args.bf16 else ""))  # train.bf16, as resolved here
            stopper.install()
            try:
                trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
            finally:
                stopper.uninstall()
                progress.close()  # a live progress bar must not outlive an exception
            # The main process decided (health); every rank needs the decision and the rollback plan.
            decision, plan = broadcast((monitor.decision if monitor else None, plan))
            if stopper.requested or decision is None or decision.action != "rollback" or not plan:
                break
            # Rollback: the bad stretch is set aside, training continues from before it with gentler settings.
            rollbacks_done += 1
            if is_main_process():
                recipe, resume_from = apply_rollback(recipe, run, plan, log=lambda m: console.print(f"[yellow]{m}[/]"))
            recipe, resume_from = broadcast((recipe, resume_from))  # the others wait until the files are set aside
            summary["rollbacks"].append({"code": decision.finding.code, "at_step": decision.finding.step,
                                         "restored": plan["checkpoint"], "learning_rate": plan["learning_rate"],
                                         "beta": plan["beta"]})
            del trainer
            # fresh weights; resume loads the checkpoint's
            model = models.load_model(model_path, recipe.model.dtype, recipe.model.init_kwargs)
    except KeyboardInterrupt:  # a second Ctrl-C: stop at once, without a save
        run.set_aside_incomplete()
        summary.update(status="aborted", reason="second Ctrl-C", seconds=round(time.time() - t0, 1),
                       step=trainer.state.global_step if trainer else 0)
        run.write_status(summary)
        raise
    except Exception as e:
        if created:  # refused before training began: leave no folder behind
            shutil.rmtree(run_dir, ignore_errors=True)
            raise
        step = trainer.state.global_step if trainer else 0
        summary["seconds"] = round(time.time() - t0, 1)
        raise fail_run(run, summary, e, step, guard.need) from None
    if stopper.requested:
        status, reason = "interrupted", stopper.requested
    elif decision is not None:
        status, reason = "stopped", f"health monitor: {decision.finding.code} at step {decision.finding.step}"
    else:
        status, reason = "completed", None
    last = run.latest_checkpoint()
    summary.update(status=status, reason=reason, seconds=round(time.time() - t0, 1), step=trainer.state.global_step,
                   reward_errors={f.name: f.errors for f in reward_funcs}, last_checkpoint=str(last) if last else None)
    run.write_status(summary)
    console.print(f"{status}{f' ({reason})' if reason else ''} at step {trainer.state.global_step} in "
                  f"{summary['seconds']:.0f}s; last checkpoint: {summary['last_checkpoint']}")
    if stopper.requested:
        console.print(f"continue with: grpokit train --resume {run_dir}")
    elif decision is not None:
        console.print(f"see {run.health} (or `grpokit doctor {run_dir}`) for the finding and its fix")
    summary["trainer"] = trainer  # for in-process callers (demo); not written to disk
    return summary


def _generation_settings(trainer, recipe: Recipe) -> None:
    """What the generation: section sets on a built trainer that GRPOConfig cannot: compile of the decode step,
    and HF sampling through grpokit.generation.sampling's warpers (top_p without sorting the vocabulary; the
    same samples as transformers' own), as evaluation and preflight sample."""
    g, args = recipe.generation, trainer.args
    if g.backend == "hf" and g.compile:
        internals.compile_generation(trainer)
    if g.backend != "hf" or not g.top_p_candidates or args.top_p >= 1.0:
        return  # nothing to gain: transformers' warpers run as they are
    internals.sample_through(trainer, warpers(args.temperature, args.top_k, args.top_p, args.min_p,
                                              candidates=g.top_p_candidates))


def _preflight_warnings(recipe: Recipe, run_dir: Path, model, tokenizer, rows: list[dict]) -> None:
    from grpokit.preflight import run_preflight

    report = run_preflight(recipe, model, tokenizer, rows, prompts=recipe.preflight.prompts,
                           generations=recipe.preflight.generations, out_file=RunDir(run_dir).preflight_file)
    for rec in report["recommendations"]:
        console.print(f"[yellow]preflight:[/] {rec['setting']}: {rec['reason']}")
