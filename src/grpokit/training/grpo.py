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
from pathlib import Path

from grpokit import internals, models, trl_compat
from grpokit.console import console
from grpokit.distributed import barrier, broadcast, is_main_process
from grpokit.envs import tool_setup, training_tools
from grpokit.errors import GrpokitError
from grpokit.health import HealthMonitor
from grpokit.recipe import Recipe, build_prompt_dataset, grpo_args, load_run_recipe, refuse_vllm_training_here
from grpokit.run import RunDir, disk_space_guard, jsonable, step_of, writable_problem
from grpokit.run.writer import append_file
from grpokit.task import Task, template_of
from grpokit.training.callbacks import CheckpointMarker, GracefulStop, RunLogger
from grpokit.training.lifecycle import (Inputs, LockHolder, RunRecord, decide_for_this_machine, load_inputs, note,
                                        open_run, read_paths,
                                        refuse_short_disk, run_for)
from grpokit.training.lineage import continuing_notes
from grpokit.training.logps import SamplerCorrection, TreeLogps, decision
from grpokit.training.no_signal import SkipNoSignalRows
from grpokit.training.probe import HeldOutProbe
from grpokit.training.refill import SignalAware
from grpokit.training.rollback import LearningRateOverride, Rollbacks, load_reference
from grpokit.training.sampling import attach_sampling
from grpokit.training.tracking import Progress, route_trackers


def _trainer_class():
    class GrpokitTrainer(SamplerCorrection, TreeLogps, SkipNoSignalRows, SignalAware, trl_compat.trainer_base()):
        """GRPOTrainer that writes samples.jsonl, runs the health monitor at each logging step, trains on the
        completions with a learning signal only (train.skip_no_signal), chooses prompts (grpokit.training.refill)
        corrects for a sampler in another precision and computes log-probs over the tree of shared prefixes
        (grpokit.training.logps)."""

        samples_path: Path | None = None
        num_samples_logged: int = 4
        health: HealthMonitor | None = None
        probe: HeldOutProbe | None = None

        def log(self, logs, start_time=None):
            if self.probe is not None:  # a held-out probe measured at this step (grpokit.training.probe)
                logs.update(self.probe.take())
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
            with append_file(self.samples_path) as f:  # never through a link (grpokit.run.writer)
                for line in written:
                    f.write(json.dumps(line, ensure_ascii=False) + "\n")
            return written

    return GrpokitTrainer


# ---------------------------------------------------------------- the run, top to bottom
def train(recipe: Recipe, *, run_dir: Path | None = None, resume: bool = False, overwrite: bool = False,
          model=None, tokenizer=None, init_from: dict | None = None, callbacks: list | None = None,
          kind: str = "run") -> dict:
    """Run GRPO for a recipe (with health rollbacks); returns the run summary written to run.json.
    `init_from` (grpokit.training.lineage's record of --init-from) is kept in run.json. `callbacks`: further
    transformers TrainerCallbacks, after grpokit's own (the benchmarks' step clocks and time budgets).

    Holds the run's lock throughout: a second writer (--resume, --overwrite) is refused. A new run's folder is
    created only once data, model and rewards have loaded; any exception after training starts is recorded
    in run.json as `failed` and raised as a GrpokitError with the way to continue.

    Example (a tiny model built from a config trains one step on the bundled arithmetic rows, in seconds on a
    CPU; a real recipe names a hub model or a folder, `grpokit train RECIPE.yaml` loads the file):

    >>> import contextlib, io, tempfile
    >>> from pathlib import Path
    >>> from transformers import AutoModelForCausalLM, LlamaConfig
    >>> from grpokit.models import default_model_dir, load_tokenizer
    >>> from grpokit.recipe import validate_raw
    >>> from grpokit.training import train
    >>> folder = Path(tempfile.mkdtemp())
    >>> tokenizer = load_tokenizer(str(default_model_dir()))
    >>> tiny = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    ...                    num_attention_heads=4, num_key_value_heads=2, eos_token_id=tokenizer.eos_token_id,
    ...                    pad_token_id=tokenizer.pad_token_id)
    >>> AutoModelForCausalLM.from_config(tiny).save_pretrained(folder / "tiny")
    >>> _ = tokenizer.save_pretrained(folder / "tiny")
    >>> recipe = validate_raw({
    ...     "model": {"name": str(folder / "tiny")},
    ...     "data": {"train": "builtin:arithmetic/train.jsonl", "template": "plain_en"},
    ...     "rewards": [{"name": "math_correctness"}, {"name": "format"}],
    ...     "train": {"max_steps": 1, "num_generations": 2, "per_device_train_batch_size": 2,
    ...               "max_completion_length": 8}})
    >>> with contextlib.redirect_stdout(io.StringIO()):  # the progress lines
    ...     summary = train(recipe, run_dir=folder / "run")
    >>> summary["status"], summary["step"]
    ('completed', 1)
    >>> {"config.yaml", "metrics.jsonl", "run.json"} <= {p.name for p in (folder / "run").iterdir()}
    True
    """
    # ---------------------------------------------------------------- prepare: refused before anything loads
    run = run_for(recipe, run_dir, kind)  # kind: the folder's record, "demo" for grpokit demo
    # vLLM training without CUDA: TRL would fail only at the first weight sync.
    refuse_vllm_training_here(recipe.generation, str(run.config if resume else recipe.source or "recipe"))
    with LockHolder(run) as held:
        if resume:
            finished = _finished_on_resume(recipe, run, held)
            if finished is not None:  # a finished run stays finished: nothing loads, nothing is written
                return finished
            resume_from = _resume_point(run)
        else:
            recipe, resume_from = _refuse_new(recipe, run, overwrite, held), None
        task = Task.from_recipe(recipe)  # rewards built (own reward functions imported) before any model loads
        inputs = load_inputs(recipe, model, tokenizer)
        job = _Job(decide_for_this_machine(recipe, inputs.notes), run, task, inputs)  # auto settings, said
        if not resume:  # what --init-from changed for a trained model (grpokit.training.lineage)
            job.inputs.notes[:0] = continuing_notes(init_from)
        refuse_short_disk(run, recipe, job.inputs.model)  # the checkpoints it keeps fit on the disk

        # ---------------------------------------------------------------- open the run
        created = False if resume else open_run(run, recipe, overwrite, held)
        barrier()  # the folder exists (and a resume's clean-up is done) before any rank trains
        for line in job.inputs.notes:
            note(line)
        rollbacks, guard = Rollbacks(run, console.print), disk_space_guard(run, note)
        summary = {"run_dir": str(run.path), "model": recipe.model.name, "train_rows": len(job.dataset),
                   "eval_rows": len(job.inputs.eval_rows), "notes": job.inputs.notes, "status": "running",
                   "resumed_from": str(resume_from) if resume_from else None, "rollbacks": rollbacks.history,
                   "init_from": init_from}
        earlier = _earlier_seconds(run) if resume else 0.0  # training time adds up over resumes
        with RunRecord(run, summary, created, need_bytes=lambda: guard.need, earlier_seconds=earlier) as record:
            if not resume and recipe.preflight.prompts and is_main_process():
                _preflight_warnings(job)

            # ---------------------------------------------------------------- train, with health rollbacks
            stopper = _train_with_rollbacks(job, record, rollbacks, resume_from, [guard, *(callbacks or [])])

        # ---------------------------------------------------------------- finish
        return _finish(record, run, stopper, rollbacks, task)


class _Job:
    """What one GRPO run trains: the recipe (gentler after a rollback), its folder, task and loaded inputs, and
    TRL's prompt dataset built from them (a tool environment's rows and kwargs first, grpokit.envs)."""

    def __init__(self, recipe: Recipe, run: RunDir, task: Task, inputs: Inputs):
        self.recipe, self.run, self.task, self.inputs = recipe, run, task, inputs
        inputs.train_rows, self.tool_kwargs = tool_setup(recipe, inputs.tokenizer, inputs.train_rows)  # {} unless env:
        self.dataset, dropped = build_prompt_dataset(inputs.train_rows, template_of(recipe), inputs.tokenizer,
                                                     recipe.train.max_prompt_length, training_tools(recipe))
        if dropped:
            inputs.notes.append(f"dropped {dropped} prompt(s) longer than train.max_prompt_length="
                                f"{recipe.train.max_prompt_length}")
        self.probe, said = HeldOutProbe.of(recipe, task, inputs.eval_rows, inputs.tokenizer, run)
        inputs.notes.append(said)


def _train_with_rollbacks(job: _Job, record: RunRecord, rollbacks: Rollbacks, resume_from: Path | None,
                          extra_callbacks: list) -> GracefulStop:
    """Train; after a health rollback, again from the restored checkpoint with the gentler recipe. The stopper of
    the last attempt says whether the user stopped it."""
    model = job.inputs.model
    while True:
        monitor = rollbacks.monitor(job.recipe, job.task.roles)
        trainer, stopper = _build_trainer(job, model, monitor, extra_callbacks)
        record.begin(trainer)
        console.print(f"training {job.recipe.model.name} on {len(job.dataset)} prompts -> {job.run.path}"
                      + (f" (resuming from {resume_from.name})" if resume_from else "")
                      + (", bf16 autocast" if trainer.args.bf16 else ""))  # train.bf16, as resolved here
        _train_until_stopped(trainer, stopper, resume_from)
        again = rollbacks.after(job.recipe, monitor, bool(stopper.requested))
        if again is None:
            return stopper
        job.recipe, resume_from = again
        del trainer
        model = models.load_recipe_model(job.recipe.model)  # fresh weights; the resume loads the checkpoint's


def _refuse_new(recipe: Recipe, run: RunDir, overwrite: bool, held: LockHolder) -> Recipe:
    """A new run: its folder refused before anything loads unless grpokit may train into it; with --overwrite the
    lock is taken now, before another process's live run there is touched."""
    recipe = recipe.for_run(run.path)
    if is_main_process():
        run.refuse_existing(overwrite, keep=read_paths(recipe))
        if overwrite and run.path.is_dir():
            held.take()
    return recipe


def _finished_on_resume(recipe: Recipe, run: RunDir, held: LockHolder) -> dict | None:
    """--resume: the run is locked for writing, then its summary if it already reached its end (None: continue;
    a raised train.max_steps is written to config.yaml). The main process decides; every rank gets it."""
    recorded = load_run_recipe(run)  # a clear error when this is no run directory
    finished = None
    if is_main_process():
        problem = writable_problem(run.path)
        if problem:
            raise GrpokitError([problem])
        held.take()
        finished = _finished(recipe, run)
    finished = broadcast(finished)  # every rank ends here when the run is finished, not only the main one
    if finished is None and is_main_process() and recipe.train.max_steps != recorded.train.max_steps:
        run.write_config(recipe)  # --set train.max_steps=N: recorded
    return finished


def _finished(recipe: Recipe, run: RunDir) -> dict | None:
    """The summary of a run that already reached its end (say so; nothing to train), or None to continue.

    The end is train.max_steps (raised with `--resume RUN --set train.max_steps=N` to continue), measured by the
    newest complete checkpoint; without max_steps (epochs) it is the status `completed`. A missing or corrupt
    run.json is rebuilt first (grpokit.run.RunDir.repair_status), so it never opens a finished run again.
    """
    status = run.repair_status(note=note)
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


def _earlier_seconds(run: RunDir) -> float:
    """The training time run.json recorded before this resume (0 when it recorded none, e.g. after a kill -9)."""
    status = run.read_status()
    seconds = status.get("seconds") if isinstance(status, dict) else None
    return float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) \
        and 0 <= seconds < float("inf") else 0.0


def _resume_point(run: RunDir) -> Path | None:
    """The checkpoint a resume continues from; the steps after it are redone, so are their metrics and samples."""
    resume_from = run.resume_checkpoint(note=note)
    if resume_from is None:
        console.print(f"[yellow]no complete checkpoint in {run.path}; starting from step 0[/]")
    if is_main_process():
        step0 = step_of(resume_from) if resume_from else 0
        run.set_aside_incomplete()  # moved aside and named, never deleted on a guess
        run.set_aside_after(step0)
        run.truncate_logs(step0)
    return resume_from


def _build_trainer(job: _Job, model, monitor: HealthMonitor | None, extra_callbacks: list):
    """One attempt's GrpokitTrainer with grpokit's callbacks, samples, health, selection and sampling settings."""
    from transformers.trainer_callback import PrinterCallback

    recipe, run, dataset = job.recipe, job.run, job.dataset
    progress, stopper = Progress(console), GracefulStop()
    trainer = _trainer_class()(
        model=model, reward_funcs=[r.fn for r in job.task.rewards], args=grpo_args(recipe, run.path),
        train_dataset=dataset, processing_class=job.inputs.tokenizer,
        peft_config=models.peft_config(recipe.model.lora),
        callbacks=[progress, RunLogger(run.path, list(job.task.roles), progress), CheckpointMarker(run), stopper,
                   LearningRateOverride(recipe.train.learning_rate), *([job.probe] if job.probe else []),
                   *extra_callbacks],
        **job.tool_kwargs,
    )
    trainer.remove_callback(PrinterCallback)  # RunLogger prints a compact line instead of the raw dict
    route_trackers(trainer, run.path)
    trainer.samples_path = run.samples
    trainer.num_samples_logged = recipe.train.num_samples_logged
    trainer.health = monitor
    trainer.probe = job.probe.attach(trainer, note) if job.probe else None
    trainer.skip_no_signal = recipe.train.skip_no_signal
    trainer.attach_selection(recipe, dataset, run.preflight_file)  # pass rates, selection, refill
    load_reference(trainer, run, log=note)  # after a health rollback: KL against the restored weights
    attach_sampling(trainer, recipe, note)  # grpokit.training.sampling: what answers TRL's generate call
    trainer.shared_prefix = recipe.train.shared_prefix
    note(decision(trainer.model, (recipe.train.max_prompt_length or 0) + recipe.train.max_completion_length,
                  recipe.train.shared_prefix))
    trainer.progress = progress
    return trainer, stopper


def _train_until_stopped(trainer, stopper: GracefulStop, resume_from: Path | None) -> None:
    """trainer.train(), with SIGINT / SIGTERM finishing the step and saving (grpokit.training.callbacks)."""
    stopper.install()
    try:
        trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    finally:
        stopper.uninstall()
        internals.stop_generating_through(trainer)  # the trained model generates as itself from here on
        trainer.progress.close()  # a live progress bar must not outlive an exception


def _finish(record: RunRecord, run: RunDir, stopper: GracefulStop, rollbacks: Rollbacks, task: Task) -> dict:
    """run.json's end (completed, interrupted by the user, stopped by the health monitor) and what to do next."""
    decision = rollbacks.decision
    if stopper.requested:
        status, reason = "interrupted", stopper.requested
    elif decision is not None:
        status, reason = "stopped", f"health monitor: {decision.finding.code} at step {decision.finding.step}"
    else:
        status, reason = "completed", None
    summary = record.end(status, reason, reward_errors={r.fn.name: r.fn.errors for r in task.rewards})
    console.print(f"{status}{f' ({reason})' if reason else ''} at step {summary['step']} in "
                  f"{summary['seconds']:.0f}s; last checkpoint: {summary['last_checkpoint']}")
    if stopper.requested:
        console.print(f"continue with: grpokit train --resume {run.path}")
    elif decision is not None:
        console.print(f"see {run.health} (or `grpokit doctor {run.path}`) for the finding and its fix")
    summary["trainer"] = record.trainer  # for in-process callers (demo); not written to disk
    return summary


def _preflight_warnings(job: _Job) -> None:
    from grpokit.preflight import run_preflight

    recipe, inputs = job.recipe, job.inputs
    report = run_preflight(recipe, inputs.model, inputs.tokenizer, inputs.train_rows, prompts=recipe.preflight.prompts,
                           generations=recipe.preflight.generations, out_dir=job.run.path)
    for rec in report["recommendations"]:
        console.print(f"[yellow]preflight:[/] {rec['setting']}: {rec['reason']}")
