"""Train a recipe with GRPO (grpokit's GRPOTrainer, grpokit.training.trainer) and write a readable run directory.

    grpokit train recipes/smollm2-arithmetic.yaml --set train.max_steps=20
    grpokit train --resume runs/smollm2-arithmetic

`train` reads top to bottom: the run's life (grpokit.training.lifecycle: its folder refused before anything
loads, one writer's lock, a resume's point, run.json's record), the job GRPO trains (`GrpoJob`: the task, its
data and model, TRL's prompt dataset, the held-out probe), the training with health rollbacks (after a rollback,
again from the restored checkpoint with a gentler recipe: grpokit.training.rollback) and the run's end. What it
made comes back as a TrainResult (summary, model, run folder). Around TRL's loop grpokit adds:
- the run directory (grpokit.run: config.yaml, run.json, metrics.jsonl, samples.jsonl, checkpoints with a COMPLETE
  marker, one writer's lock); any exception ends as run.json `failed` + `error:`/`fix:` (grpokit.run.safety);
- SIGINT / SIGTERM finish the current step, save a checkpoint and exit cleanly (a second Ctrl-C aborts at once);
- a metrics line per logging step under a progress bar with ETA (grpokit.training.tracking), and the trackers of
  `trl.report_to` (tensorboard event files go to `tensorboard/`);
- the health monitor after every logging step (grpokit.health): findings go to `health.jsonl` and the terminal;
  per code the recipe says warn, stop, or rollback.

The trainer and its parts come from grpokit.training.factory. Not covered here: the detectors (grpokit.health),
prompt selection and refill (grpokit.training.selection, .refill), evaluation, export (their own packages).
"""
from __future__ import annotations

from pathlib import Path

from grpokit import models
from grpokit.console import console
from grpokit.distributed import is_main_process
from grpokit.envs import tool_setup, training_tools
from grpokit.health import HealthMonitor
from grpokit.preflight import run_preflight
from grpokit.recipe import Recipe, build_prompt_dataset, refuse_vllm_training_here
from grpokit.run import disk_space_guard
from grpokit.task import Task, template_of
from grpokit.training.callbacks import CheckpointMarker, GracefulStop, RunLogger
from grpokit.training.factory import grpo_trainer
from grpokit.training.lifecycle import RunLife, RunRecord, TrainResult, note
from grpokit.training.lineage import continuing_notes
from grpokit.training.probe import HeldOutProbe
from grpokit.training.rollback import LearningRateOverride, Rollbacks
from grpokit.training.tracking import Progress


def train(recipe: Recipe, *, run_dir: Path | None = None, resume: bool = False, overwrite: bool = False,
          model=None, tokenizer=None, init_from: dict | None = None, callbacks: list | None = None,
          kind: str = "run") -> TrainResult:
    """Run GRPO for a recipe (with health rollbacks); returns a TrainResult: the run summary written to run.json,
    the trained model and the run's folder. `init_from` (grpokit.training.lineage's record of --init-from) is kept
    in run.json. `callbacks`: further transformers TrainerCallbacks, after grpokit's own (the benchmarks' step
    clocks and time budgets).

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
    ...     result = train(recipe, run_dir=folder / "run")
    >>> result.summary["status"], result.summary["step"], result.run_dir == folder / "run"
    ('completed', 1, True)
    >>> {"config.yaml", "metrics.jsonl", "run.json"} <= {p.name for p in (folder / "run").iterdir()}
    True
    """
    # ---------------------------------------------------------------- prepare: refused before anything loads
    # vLLM training without CUDA is refused first: TRL would fail only at the first weight sync.
    with RunLife(recipe, run_dir, kind, resume=resume, overwrite=overwrite, prepare=refuse_vllm_here) as life:
        if life.finished is not None:  # a finished run stays finished: nothing loads, nothing is written
            return life.result(life.finished)

        # ---------------------------------------------------------------- load: rewards, data and model
        job = GrpoJob(life, model, tokenizer, None if resume else init_from)

        # ---------------------------------------------------------------- open the run
        life.open(job.inputs)
        rollbacks, guard = Rollbacks(life.run, console.print), disk_space_guard(life.run, note)
        with life.record(job.summary(rollbacks, init_from), need_bytes=lambda: guard.need) as record:
            job.preflight()

            # ---------------------------------------------------------------- train, with health rollbacks
            stopper = job.train_with_rollbacks(record, rollbacks, [guard, *(callbacks or [])])

        # ---------------------------------------------------------------- finish
        return life.result(job.finish(record, stopper, rollbacks), record.trainer)


def refuse_vllm_here(recipe: Recipe, run, resume: bool) -> None:
    """vLLM training on a machine without CUDA, named with the recipe's file (a resume's config.yaml)."""
    refuse_vllm_training_here(recipe.generation, str(run.config if resume else recipe.source or "recipe"))


class GrpoJob:
    """What one GRPO run trains: the recipe as this machine trains it (gentler after a rollback), its task (rewards
    built, own reward functions imported, before any model loads), the loaded inputs, TRL's prompt dataset (a tool
    environment's rows and kwargs first, grpokit.envs) and the held-out probe."""

    def __init__(self, life: RunLife, model, tokenizer, init_from: dict | None):
        self.run, self.task = life.run, Task.from_recipe(life.recipe)
        self.inputs = life.load(model, tokenizer)
        self.recipe, self.resume_from, self.resumed = self.inputs.recipe, life.resume_from, life.resume
        self.inputs.notes[:0] = continuing_notes(init_from)  # what --init-from changed (grpokit.training.lineage)
        rows, self.tool_kwargs = tool_setup(self.recipe, self.inputs.tokenizer, self.inputs.train_rows)  # {} unless env:
        self.inputs.train_rows = rows
        self.dataset, dropped = build_prompt_dataset(rows, template_of(self.recipe), self.inputs.tokenizer,
                                                     self.recipe.train.max_prompt_length, training_tools(self.recipe))
        if dropped:
            self.inputs.notes.append(f"dropped {dropped} prompt(s) longer than train.max_prompt_length="
                                     f"{self.recipe.train.max_prompt_length}")
        self.probe, said = HeldOutProbe.of(self.recipe, self.task, self.inputs.eval_rows, self.inputs.tokenizer, self.run)
        self.inputs.notes.append(said)

    def summary(self, rollbacks: Rollbacks, init_from: dict | None) -> dict:
        """run.json while the run trains."""
        return {"run_dir": str(self.run.path), "model": self.recipe.model.name, "train_rows": len(self.dataset),
                "eval_rows": len(self.inputs.eval_rows), "notes": self.inputs.notes, "status": "running",
                "resumed_from": str(self.resume_from) if self.resume_from else None, "rollbacks": rollbacks.history,
                "init_from": init_from}

    def preflight(self) -> None:
        """A new run's preflight (preflight.prompts baseline rollouts): its recommendations, said."""
        if self.resumed or not self.recipe.preflight.prompts or not is_main_process():
            return
        report = run_preflight(self.recipe, self.inputs.model, self.inputs.tokenizer, self.inputs.train_rows,
                               prompts=self.recipe.preflight.prompts, generations=self.recipe.preflight.generations,
                               out_dir=self.run.path)
        for rec in report["recommendations"]:
            console.print(f"[yellow]preflight:[/] {rec['setting']}: {rec['reason']}")

    def train_with_rollbacks(self, record: RunRecord, rollbacks: Rollbacks, extra_callbacks: list) -> GracefulStop:
        """Train; after a health rollback, again from the restored checkpoint with the gentler recipe. The stopper of
        the last attempt says whether the user stopped it."""
        model = self.inputs.model
        while True:
            monitor = rollbacks.monitor(self.recipe, self.task.roles, self.probe)
            trainer, stopper = self.trainer(model, monitor, extra_callbacks)
            record.begin(trainer)
            console.print(f"training {self.recipe.model.name} on {len(self.dataset)} prompts -> {self.run.path}"
                          + (f" (resuming from {self.resume_from.name})" if self.resume_from else "")
                          + (", bf16 autocast" if trainer.args.bf16 else ""))  # train.bf16, as resolved here
            stopper.install()  # SIGINT / SIGTERM finish the step and save (grpokit.training.callbacks)
            try:
                trainer.train(resume_from_checkpoint=str(self.resume_from) if self.resume_from else None)
            finally:
                stopper.uninstall()
            again = rollbacks.after(self.recipe, monitor, bool(stopper.requested))
            if again is None:
                return stopper
            self.recipe, self.resume_from = again
            del trainer
            model = models.load_recipe_model(self.recipe.model)  # fresh weights; the resume loads the checkpoint's

    def trainer(self, model, monitor: HealthMonitor | None, extra_callbacks: list):
        """One attempt's trainer (grpokit.training.factory) with grpokit's callbacks, and its stopper."""
        progress, stopper = Progress(console), GracefulStop()
        callbacks = [progress, RunLogger(self.run.path, list(self.task.roles), progress), CheckpointMarker(self.run),
                     stopper, LearningRateOverride(self.recipe.train.learning_rate),
                     *([self.probe] if self.probe else []), *extra_callbacks]
        trainer = grpo_trainer(self.recipe, model, self.inputs.tokenizer, self.dataset,
                               [r.fn for r in self.task.rewards], run=self.run, callbacks=callbacks, health=monitor,
                               probe=self.probe, progress=progress, log=note, tool_kwargs=self.tool_kwargs)
        return trainer, stopper

    def finish(self, record: RunRecord, stopper: GracefulStop, rollbacks: Rollbacks) -> dict:
        """run.json's end (completed, interrupted by the user, stopped by the health monitor) and what to do next."""
        decision = rollbacks.decision
        if stopper.requested:
            status, reason = "interrupted", stopper.requested
        elif decision is not None:
            status, reason = "stopped", f"health monitor: {decision.finding.code} at step {decision.finding.step}"
        else:
            status, reason = "completed", None
        summary = record.end(status, reason, reward_errors={r.fn.name: r.fn.errors for r in self.task.rewards})
        console.print(f"{status}{f' ({reason})' if reason else ''} at step {summary['step']} in "
                      f"{summary['seconds']:.0f}s; last checkpoint: {summary['last_checkpoint']}")
        if stopper.requested:
            console.print(f"continue with: grpokit train --resume {self.run.path}")
        elif decision is not None:
            console.print(f"see {self.run.health} (or `grpokit doctor {self.run.path}`) for the finding and its fix")
        return summary
