"""The life of one training run, shared by GRPO (grpokit.training.grpo) and SFT (grpokit.training.sft).

Each trainer's entry function reads as the same steps, in the order a run goes through them:

    run = run_for(recipe, run_dir)                      # prepare: the folder is refused before anything loads
    with LockHolder(run) as held:                       # one writer: the lock, once taken, is held to the end
        inputs = load_inputs(recipe, model, tokenizer)  # data, threads, tokenizer and model (grpokit.models)
        refuse_short_disk(run, recipe, inputs.model)    # the checkpoints it keeps fit on the disk
        created = open_run(run, recipe, overwrite, held)  # only now does a new run get its folder
        with RunRecord(run, summary, created) as record:  # a failure from here on is written to run.json
            trainer = ...                               # build the trainer (each caller's own)
            record.begin(trainer)
            trainer.train()
        record.end("completed")                         # finish: run.json says how it ended

What is GRPO's alone (resume, health rollbacks, the prompt dataset and its selection) stays in grpo.py.
Not covered: what a run directory holds (grpokit.run.RunDir) and what may be cleared (grpokit.run.ownership).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from grpokit import models
from grpokit.console import console
from grpokit.distributed import broadcast, is_main_process
from grpokit.errors import GrpokitError, Problem
from grpokit.run import RunDir, disk_problem, fail_run
from grpokit.run.writer import remove_made


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
        self.run, self.lock = run, None

    def take(self) -> None:
        if self.lock is None:
            self.lock = self.run.lock(note=note).acquire()

    def __enter__(self) -> "LockHolder":
        return self

    def __exit__(self, *exc) -> None:
        if self.lock is not None:
            self.lock.release()
            self.lock = None


@dataclass
class Inputs:
    """What a run trains on, loaded before its folder exists (a bad file or model leaves nothing behind)."""

    train_rows: list[dict]
    eval_rows: list[dict]
    notes: list[str]
    tokenizer: object
    model: object


def load_inputs(recipe, model=None, tokenizer=None) -> Inputs:
    """Data, the recipe's CPU threads, tokenizer and model (grpokit.models' one loader; a caller's own when given)."""
    from grpokit.data import load_datasets

    if recipe.train.torch_threads:
        import torch

        torch.set_num_threads(recipe.train.torch_threads)
    train_rows, eval_rows, notes = load_datasets(recipe)
    tokenizer = tokenizer or models.load_recipe_tokenizer(recipe.model)
    model = model or models.load_recipe_model(recipe.model)
    return Inputs(train_rows, eval_rows, notes, tokenizer, model)


def decide_for_this_machine(recipe, notes: list[str]):
    """The recipe with its `auto` machine settings decided here, each decision said in `notes` (the run's first
    lines): model.gradient_checkpointing from the memory plan (grpokit.preflight.memory.checkpointing_of). The
    recipe the run folder records keeps `auto`, so a resume on another machine decides again."""
    import os

    import torch

    from grpokit.preflight.memory import checkpointing_of

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
