"""The life of one training run, shared by GRPO (grpokit.training.grpo) and SFT (grpokit.training.sft), in one
place and in the order a run goes through it:

    with RunLife(recipe, run_dir, resume=..., overwrite=...) as life:  # prepare: refused before anything loads;
        if life.finished: return ...                                   #   one writer's lock, held to the end
        inputs = life.load(model, tokenizer)                           # data, threads, tokenizer and model
        life.open(inputs)                                              # disk checked; only now a new run's folder
        with life.record(summary) as record:                           # a failure from here on is in run.json
            trainer = ...; record.begin(trainer); trainer.train()      # each trainer's own (grpo.py, sft.py)
        summary = record.end("completed")                              # finish: run.json says how it ended
        return life.result(summary, trainer)                           # what the caller gets: TrainResult

A resume (`resume=True`) locks the run before anything loads, returns the summary of a run that already reached
its end, else sets aside what comes after the checkpoint it continues from. What is GRPO's alone (health
rollbacks, the prompt dataset and its selection) is grpo.py's. Not covered: what a run directory holds
(grpokit.run.RunDir) and what may be cleared (grpokit.run.ownership).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from grpokit import models
from grpokit.console import console
from grpokit.data import load_datasets
from grpokit.distributed import barrier, broadcast, is_main_process
from grpokit.errors import GrpokitError, Problem
from grpokit.preflight.memory import checkpointing_of
from grpokit.recipe import load_run_recipe
from grpokit.run import RunDir, disk_problem, fail_run, step_of, writable_problem
from grpokit.run.layout import MODEL_CARD
from grpokit.run.writer import check_library_target, remove_made


def note(line: str) -> None:
    console.print(f"[yellow]note:[/] {line}")


def run_for(recipe, run_dir: str | Path | None, kind: str = "run") -> RunDir:
    """The run's folder: --output-dir, else the recipe's output_dir; '' (the current folder) is refused. `kind`:
    what its record says it is (grpokit.run.record: "run", or "demo" for grpokit demo)."""
    chosen = recipe.output_dir if run_dir is None else run_dir
    if not str(chosen).strip():  # '' would be the current folder: refused, never trained into (or cleared)
        raise GrpokitError([Problem("--output-dir" if run_dir is not None else f"{recipe.source or 'recipe'} output_dir",
                                    "is empty (it would mean the current folder)",
                                    "name a new folder for the run, e.g. runs/my-run")])
    return RunDir(Path(chosen).expanduser().resolve(), kind)


def read_paths(recipe) -> list[str]:
    """Files the run reads (recipe, data, a local model): a folder holding one is never cleared by --overwrite."""
    return recipe.read_paths()


class LockHolder:
    """The run's lock (grpokit.run.RunLock) from the moment it is first taken until the `with` block ends, whoever
    took it: a resume and an --overwrite take it before anything loads, a new run when its folder is created."""

    def __init__(self, run: RunDir):
        self.run, self.lock, self.evaluation = run, None, None

    def take(self) -> None:
        if self.lock is None:
            self.lock = self.run.lock(note=note).acquire()

    def take_evaluation(self) -> None:
        """--overwrite: the lock of the run's eval/ too, until the old run is cleared (`cleared`): an evaluation
        running now refuses the overwrite, and none starts meanwhile (it would write the old run's results and
        best.json into the new run)."""
        if self.evaluation is None:
            self.evaluation = self.run.evaluation_lock(
                "train --overwrite", f"wait for that evaluation of {self.run.path} to finish (or stop it), then run "
                "this train --overwrite again").__enter__()

    def cleared(self) -> None:
        if self.evaluation is not None:
            self.evaluation.__exit__(None, None, None)
            self.evaluation = None

    def __enter__(self) -> "LockHolder":
        return self

    def __exit__(self, *exc) -> None:
        self.cleared()
        if self.lock is not None:
            self.lock.release()
            self.lock = None


@dataclass
class Inputs:
    """What a run trains on, loaded before its folder exists (a bad file or model leaves nothing behind), and the
    recipe as this machine trains it (`auto` settings decided; the run's folder keeps `auto`)."""

    train_rows: list[dict]
    eval_rows: list[dict]
    notes: list[str]
    tokenizer: object
    model: object
    recipe: object = None


def load_inputs(recipe, model=None, tokenizer=None) -> Inputs:
    """Data, the recipe's CPU threads, tokenizer and model (grpokit.models' one loader; a caller's own when given)."""
    if recipe.train.torch_threads:
        torch.set_num_threads(recipe.train.torch_threads)
    train_rows, eval_rows, notes = load_datasets(recipe)
    tokenizer = tokenizer or models.load_recipe_tokenizer(recipe.model)
    model = model or models.load_recipe_model(recipe.model)
    return Inputs(train_rows, eval_rows, notes, tokenizer, model)


def decide_for_this_machine(recipe, notes: list[str]):
    """The recipe with its `auto` machine settings decided here, each decision said in `notes` (the run's first
    lines): model.gradient_checkpointing from the memory plan (grpokit.preflight.memory.checkpointing_of). The
    recipe the run folder records keeps `auto`, so a resume on another machine decides again."""
    if recipe.model.gradient_checkpointing != "auto":
        return recipe
    device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        on, why = checkpointing_of(recipe, device, int(os.environ.get("WORLD_SIZE", "1")))
    except GrpokitError as e:  # no config.json to plan from (an offline hub id): the cheaper choice, said
        on, why = False, f"model.gradient_checkpointing: auto; no memory plan ({e.problems[0].message})"
    notes.append(f"gradient checkpointing {'on' if on else 'off'} ({why})")
    return recipe.model_copy(update={"model": recipe.model.model_copy(update={"gradient_checkpointing": on})})


def open_run(run: RunDir, recipe, overwrite: bool, held: LockHolder) -> bool:
    """Create the run's folder (with --overwrite: clear grpokit's files from it) and hold its lock from here; True
    when the folder was created here (a failure before training begins then removes it). Main process only."""
    if not is_main_process():
        return False
    held.lock, created = run.open_new(recipe, overwrite, held.lock, note=note)
    held.cleared()  # the old run's eval/ is gone: evaluations of the new run may start
    return created


def refuse_short_disk(run: RunDir, recipe, model) -> None:
    """Before the run's folder is created (or a resume trains on): refused when the disk cannot hold the
    checkpoints the run keeps (grpokit.run.disk_problem), instead of failing at a save minutes or hours in."""
    problem = broadcast(disk_problem(run, model, recipe.train) if is_main_process() else None)  # every rank stops
    if problem:
        raise GrpokitError([problem], title="not enough disk space for the run's checkpoints")


@dataclass
class RunRecord:
    """run.json of a run being trained, and how the run ends.

    Inside its `with` block an exception is recorded: a second Ctrl-C as `aborted`, any other as `failed` with
    error/fix (grpokit.run.fail_run) — except before training began in a folder this run created, which is
    removed instead (a refused start leaves no folder behind). `need_bytes`: the disk guard's estimate, for the
    disk-full message. `seconds` adds up over resumes (`earlier_seconds`: what run.json recorded before this
    session); `seconds_this_session` is this process's share."""

    run: RunDir
    summary: dict
    created: bool = False
    need_bytes: Callable[[], int | None] = lambda: None
    trainer: object = None
    started: bool = False
    earlier_seconds: float = 0.0
    t0: float = field(default_factory=time.time)

    @property
    def step(self) -> int:
        return self.trainer.state.global_step if self.trainer is not None else 0

    def begin(self, trainer) -> None:
        """Training begins: run.json says `running`; from here a failure is recorded, not cleaned away."""
        self.trainer, self.started = trainer, True
        self.run.write_status(self.summary)

    def _clock(self) -> dict:
        session = time.time() - self.t0
        return {"seconds": round(self.earlier_seconds + session, 1), "seconds_this_session": round(session, 1)}

    def end(self, status: str, reason: str | None = None, **extra) -> dict:
        last = self.run.latest_checkpoint()
        self.summary.update(status=status, reason=reason, **self._clock(), step=self.step,
                            last_checkpoint=str(last) if last else None, **extra)
        self.run.write_status(self.summary)
        return self.summary

    def __enter__(self) -> "RunRecord":
        return self

    def __exit__(self, kind, exc, tb) -> None:
        if exc is None:
            return
        if isinstance(exc, KeyboardInterrupt):  # a second Ctrl-C: stop at once, without a save
            self.run.set_aside_incomplete()
            self.summary.update(status="aborted", reason="second Ctrl-C", **self._clock(), step=self.step)
            self.run.write_status(self.summary)
            return
        if not isinstance(exc, Exception):
            return
        if self.created and not self.started:  # refused before training began: leave no folder behind
            remove_made(self.run.path)
            return
        self.summary.update(self._clock())
        raise fail_run(self.run, self.summary, exc, self.step, self.need_bytes()) from None


# ---------------------------------------------------------------- resume
def finished_on_resume(recipe, run: RunDir, held: LockHolder) -> dict | None:
    """--resume: the run is locked for writing, then its summary if it already reached its end (None: continue;
    a raised train.max_steps is written to config.yaml). The main process decides; every rank gets it."""
    recorded = load_run_recipe(run)  # a clear error when this is no run directory
    finished = None
    if is_main_process():
        problem = writable_problem(run.path)
        if problem:
            raise GrpokitError([problem])
        held.take()
        # TRL rewrites its model card at each save: a link planted there is refused before any model loads
        check_library_target(run.checkpoints_dir / MODEL_CARD, within=run.path)
        finished = _finished(recipe, run)
    finished = broadcast(finished)  # every rank ends here when the run is finished, not only the main one
    if finished is None and is_main_process() and recipe.train.max_steps != recorded.train.max_steps:
        run.write_config(recipe)  # --set train.max_steps=N: recorded
    return finished


def _finished(recipe, run: RunDir) -> dict | None:
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


def earlier_seconds(run: RunDir) -> float:
    """The training time run.json recorded before this resume (0 when it recorded none, e.g. after a kill -9)."""
    status = run.read_status()
    seconds = status.get("seconds") if isinstance(status, dict) else None
    return float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) \
        and 0 <= seconds < float("inf") else 0.0


def resume_point(run: RunDir) -> Path | None:
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


def refuse_new(recipe, run: RunDir, overwrite: bool, held: LockHolder):
    """A new run: its folder refused before anything loads unless grpokit may train into it; with --overwrite the
    lock is taken now, before another process's live run there is touched. Returns the recipe as the run keeps it
    (paths resolved against the run, grpokit.recipe.Recipe.for_run)."""
    recipe = recipe.for_run(run.path)
    if is_main_process():
        run.refuse_existing(overwrite, keep=read_paths(recipe))
        if overwrite and run.path.is_dir():
            held.take()
            held.take_evaluation()
    return recipe


# ---------------------------------------------------------------- the run's life, in one object
@dataclass
class TrainResult:
    """What a training entry returns (grpokit.training.train, train_sft): the summary run.json holds, the trained
    model (None when nothing trained: a resume of a finished run), the run's folder, and the last trainer for an
    in-process caller that inspects it (its reference model, its tokenizer)."""

    summary: dict
    model: object
    run_dir: Path
    trainer: object = None

    @property
    def status(self) -> str | None:
        return self.summary.get("status")


class RunLife:
    """One run's life (the module docstring), for GRPO and SFT: its folder, refused before anything loads; its lock,
    held from the moment it is first taken to the end; a resume's point; the run's opening and its record.
    `prepare(recipe, run, resume)`: a check of the trainer's own made before the lock (GRPO: vLLM without CUDA)."""

    def __init__(self, recipe, run_dir: str | Path | None = None, kind: str = "run", *, resume: bool = False,
                 overwrite: bool = False, prepare: Callable | None = None):
        self.run = run_for(recipe, run_dir, kind)  # kind: the folder's record, "demo" for grpokit demo
        self.recipe, self.resume, self.overwrite = recipe, resume, overwrite
        if prepare is not None:
            prepare(recipe, self.run, resume)
        self.held = LockHolder(self.run)
        self.finished: dict | None = None  # a resumed run that already reached its end: its summary
        self.resume_from: Path | None = None  # the checkpoint a resume continues from
        self.created = False  # a new run's folder was created here (removed again if training never began)

    def __enter__(self) -> "RunLife":
        try:
            if self.resume:
                self.finished = finished_on_resume(self.recipe, self.run, self.held)
                if self.finished is None:
                    self.resume_from = resume_point(self.run)
            else:
                self.recipe = refuse_new(self.recipe, self.run, self.overwrite, self.held)
        except BaseException:
            self.held.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.held.__exit__(*exc)

    def load(self, model=None, tokenizer=None) -> "Inputs":
        """The inputs (load_inputs), then the recipe's `auto` machine settings decided here and said with them."""
        inputs = load_inputs(self.recipe, model, tokenizer)
        inputs.recipe = decide_for_this_machine(self.recipe, inputs.notes)
        return inputs

    def open(self, inputs: "Inputs", say: Callable[[str], None] = None) -> None:
        """The disk holds the checkpoints the run keeps; a new run's folder is created (its lock held from here);
        every rank waits for it; the notes gathered while loading are said."""
        refuse_short_disk(self.run, self.recipe, inputs.model)
        self.created = False if self.resume else open_run(self.run, self.recipe, self.overwrite, self.held)
        barrier()  # the folder exists (and a resume's clean-up is done) before any rank trains
        for line in inputs.notes:
            (say or note)(line)

    def record(self, summary: dict, need_bytes: Callable[[], int | None] = lambda: None) -> "RunRecord":
        """run.json of the run being trained (RunRecord); training time adds up over resumes."""
        earlier = earlier_seconds(self.run) if self.resume else 0.0
        return RunRecord(self.run, summary, self.created, need_bytes=need_bytes, earlier_seconds=earlier)

    def result(self, summary: dict, trainer=None) -> TrainResult:
        return TrainResult(summary, trainer.model if trainer is not None else None, self.run.path, trainer)
