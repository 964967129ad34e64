"""The run directory: every path and file of a grpokit run, owned in one place.

    run = RunDir("runs/smollm2-arithmetic")
    run.read_metrics()                 # crash-tolerant: a cut or corrupt line is skipped with one note
    run.complete_checkpoints()         # checkpoint-N folders with their COMPLETE marker, oldest first
    run.resolve_checkpoint("auto")     # all|best|last|auto|N -> a folder (None: step 0, the base model)
    with run.lock(): ...               # one writer per run directory

Layout (docs/run-directory.md "The run directory"): `config.yaml` (the resolved recipe),
`run.json` (status, see `STATUSES`), `metrics.jsonl`, `samples.jsonl`,
`health.jsonl`, `checkpoints/checkpoint-N/` (COMPLETE once fully written),
`eval/results*.json`, `eval/best.json`, `report/`, `export/`, `.lock`, `.grpokit-record.json` (the authorship
record, grpokit.run.record), after a health rollback `reference/` (the restored weights, hard links: the KL
reference, grpokit.training.rollback), and `set-aside/` (checkpoints a resume or a failure found incomplete,
moved there, never deleted).

Files are read through grpokit.run.files (crash-tolerant JSONL: a line cut by a crash is skipped with one
note); checkpoint names and damage checks are grpokit.run.checkpoints, the locks grpokit.run.locks.

Not covered: what the records mean (training, health, evaluation, report).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Callable

from grpokit.distributed import is_main_process
from grpokit.errors import GrpokitError, Problem
from grpokit.run.checkpoints import RunCheckpoints
from grpokit.run.locks import FolderLock, RunLock
from grpokit.run.files import note, read_json, read_jsonl, split_jsonl
from grpokit.run.layout import (BEST_FILE, CHECKPOINTS_DIR, CONFIG_FILE, DEMO_FILE, EVAL_DIR, EXPORT_DIR, HEALTH_FILE,
                                LOCK_FILE, METRICS_FILE, PREFLIGHT_FILE, REFERENCE_DIR, REPORT_DIR, RUN_FILE,
                                SAMPLES_FILE, STATUSES, TOOL_RESULTS_FILE)
from grpokit.run.layout import own_entries
from grpokit.run.ownership import _NEW_DIR_FIX, RUN_KINDS, clear_run, refuse_output_dir
from grpokit.run.record import RECORD_FILE, new_record, read_record, record_problem, refuse_foreign
from grpokit.run.temporaries import sweep
from grpokit.run.writer import append_file, make_folder, remove_made, rewrite_in_place, write_file
from grpokit.run.claims import write_record

_SAID: set[tuple[str, int, int]] = set()  # (file, mtime, size) of a damaged best.json already said in this process


# ---------------------------------------------------------------- the run directory
class RunDir(RunCheckpoints):
    """Paths and files of one run; see the module docstring."""

    def __init__(self, path: str | Path, kind: str = "run"):
        self.path, self.kind = Path(path), kind  # kind: what its record says it is, "run" or "demo"

    def __str__(self) -> str:
        return str(self.path)

    config = property(lambda self: self.path / CONFIG_FILE)
    run_json = property(lambda self: self.path / RUN_FILE)
    metrics = property(lambda self: self.path / METRICS_FILE)
    samples = property(lambda self: self.path / SAMPLES_FILE)
    health = property(lambda self: self.path / HEALTH_FILE)
    checkpoints_dir = property(lambda self: self.path / CHECKPOINTS_DIR)
    eval_dir = property(lambda self: self.path / EVAL_DIR)
    best_file = property(lambda self: self.path / EVAL_DIR / BEST_FILE)
    tool_results_file = property(lambda self: self.path / EVAL_DIR / TOOL_RESULTS_FILE)
    report_dir = property(lambda self: self.path / REPORT_DIR)
    demo_file = property(lambda self: self.path / DEMO_FILE)
    preflight_file = property(lambda self: self.path / PREFLIGHT_FILE)
    reference_dir = property(lambda self: self.path / REFERENCE_DIR)

    def rolled_back(self, log: Path) -> Path:
        return log.with_name(log.name.replace(".jsonl", ".rolled_back.jsonl"))

    def export_dir(self, ck: Path) -> Path:
        return self.path / EXPORT_DIR / Path(ck).name

    def results_path(self, data: str | None = None) -> Path:
        """eval/results.json for the recipe's held-out set, eval/results-<stem>.json for --data FILE."""
        stem = "" if data is None else "-" + re.sub(r"[^\w.-]+", "_", Path(data).stem)
        return self.eval_dir / f"results{stem}.json"

    # -- config.yaml and run.json
    def is_run(self) -> bool:
        return self.config.is_file()

    def raw_config(self) -> dict | None:
        """config.yaml as plain data (no validation: doctor and report read runs of older versions too)."""
        import yaml

        try:
            data = yaml.safe_load(self.config.read_text(encoding="utf-8")) if self.is_run() else None
        except (yaml.YAMLError, UnicodeDecodeError):
            note(f"{self.config}: not readable YAML; ignored")
            return None
        return data if isinstance(data, dict) else None

    def write_config(self, recipe) -> None:
        write_file(self.config, recipe.to_yaml(), within=self.path)

    def read_status(self) -> dict:
        return read_json(self.run_json) or {}

    def repair_status(self, note: Callable[[str], None] = note) -> dict:
        """run.json; when it is missing or unreadable, rebuilt from the checkpoints and metrics.jsonl, written back
        (with a note). Rebuilt, a run is `completed` when its newest checkpoint reached the max_steps its trainer
        was training towards, else `interrupted` (resumable): a lost record never makes a finished run look open."""
        status = read_json(self.run_json, note=lambda _: None)
        if isinstance(status, dict) and status.get("status") in STATUSES:
            return status
        step, trainer_max = self.checkpoint_progress()
        logged = [r["step"] for r in self.read_metrics() if type(r.get("step")) is int]
        last = self.latest_checkpoint()
        done = trainer_max is not None and step >= trainer_max
        status = {"run_dir": str(self.path), "status": "completed" if done else "interrupted",
                  "reason": f"{RUN_FILE} was {'unreadable' if self.run_json.exists() else 'missing'}: rebuilt from "
                            f"{CHECKPOINTS_DIR}/ and {METRICS_FILE}",
                  "step": max([step, *logged]), "last_checkpoint": str(last) if last else None, "rebuilt": True}
        self.write_status(status)
        note(f"{self.run_json}: {status['reason']} (status {status['status']}, step {status['step']})")
        return status

    def write_status(self, summary: dict, in_place: bool = False) -> None:
        """run.json (main process only). `in_place`: over the old file's own blocks, for a disk too full for a new
        file (grpokit.run.safety.fail_run records a failure so)."""
        if not is_main_process():  # with N processes (grpokit.training.launch) the main one alone writes run.json
            return
        data = {k: v for k, v in summary.items() if k != "trainer"}
        if in_place:
            rewrite_in_place(self.run_json, json.dumps(data, default=str), within=self.path)
        else:
            write_file(self.run_json, json.dumps(data, indent=2, default=str), within=self.path)

    # -- logs
    def read_metrics(self) -> list[dict]:
        return read_jsonl(self.metrics)

    def read_samples(self) -> list[dict]:
        return read_jsonl(self.samples)

    def read_health(self) -> list[dict]:
        return read_jsonl(self.health)

    def truncate_logs(self, step: int, keep_dropped: bool = False) -> None:
        """Metrics and samples back to the last whole record of `step` (resume and rollback redo later steps)."""
        for log in (self.metrics, self.samples):
            dropped = split_jsonl(log, step)
            if dropped and keep_dropped:
                with append_file(self.rolled_back(log), within=self.path) as f:
                    f.writelines(raw.decode("utf-8") + "\n" for raw in dropped)

    # -- eval results and the best checkpoint
    def read_best(self) -> dict | None:
        """eval/best.json, or None: none yet, or one without a whole step (said once, with the fix that works:
        `grpokit eval RUN` chooses again and writes a new one)."""
        if not os.path.lexists(self.best_file):
            return None
        best = read_json(self.best_file, note=lambda _: None)
        step = best.get("step") if best is not None else None
        if type(step) is int and step >= 0:
            return best
        why = "not a JSON object (cut by a crash?)" if best is None else f"no whole step (step: {str(step)[:40]})"
        st = os.lstat(self.best_file)
        said = (str(self.best_file), st.st_mtime_ns, st.st_size)
        if said not in _SAID:  # once per state of the file: --init-from and `auto` read it twice in one command
            _SAID.add(said)
            note(f"{self.best_file}: {why}: ignored, so no best checkpoint is recorded (auto takes the last one); "
                 f"`grpokit eval {self.path}` chooses the best checkpoint again and writes a new one")
        return None

    def write_best(self, best: dict) -> None:
        write_file(self.best_file, json.dumps(best, indent=2), within=self.path)

    def resolve_checkpoint(self, spec: str) -> Path | None:
        """`best`, `last`, `auto` (best if `grpokit eval` recorded one, else last) or a step -> its folder.

        None means step 0, the base model (a `best` that no checkpoint beat). Only complete checkpoints count.
        """
        by_step = self.by_step()
        names = ", ".join(p.name for p in by_step.values()) or "none"
        best = self.read_best()
        if spec == "auto":
            spec = "best" if best is not None else "last"
        if spec == "best":
            if best is None:
                raise GrpokitError([Problem(str(self.path), f"no best checkpoint recorded yet ({EVAL_DIR}/{BEST_FILE} "
                                            "is missing)", f"run `grpokit eval {self.path}` first, or pass last or a step")])
            step = int(best["step"])
        elif spec == "last":
            if not by_step:
                raise GrpokitError([Problem(str(self.path), "no complete checkpoint in this run",
                                            "train first (or longer, or with a lower train.save_steps)")])
            step = max(by_step)
        elif spec.isdigit():
            step = int(spec)
        else:
            raise GrpokitError([Problem(spec, "not a checkpoint", f"use best, last, auto or a step; complete: {names}")])
        if step == 0:
            return None
        if step not in by_step:
            raise GrpokitError([Problem(str(self.path), f"no complete checkpoint at step {step}",
                                        f"complete checkpoints: {names}")])
        return by_step[step]

    # -- writing: the lock, and disk space
    def lock(self, note: Callable[[str], None] = note):
        """The writer's lock; its token is the one the run's record names (a run without a record: a new one). Once
        held, the temporaries a killed writer left anywhere in the run are removed (grpokit.run.temporaries.sweep)."""
        record = read_record(self.path) if self.path.is_dir() else None
        forged = record_problem(self.path) if self.path.is_dir() else None
        if forged is None and record is not None and record["kind"] not in RUN_KINDS:
            forged = f"its {RECORD_FILE} says kind {record['kind']}"
        if forged:  # a damaged or forged record: no command writes here, a resume included
            raise GrpokitError([Problem(str(self.path), f"is not a grpokit run ({forged}): nothing was written",
                                        "train into a new --output-dir (this folder is not grpokit's to write)")],
                               title="not a grpokit run")
        token = (record or {}).get("lock_token")
        return RunLock(self.path / LOCK_FILE, note, token if isinstance(token, str) else None,
                       then=lambda: sweep(self.path, whole=True))

    def refuse_existing(self, overwrite: bool, keep: list = (), kinds=RUN_KINDS) -> None:
        """Refuse an --output-dir training may not use, before anything loads (nothing is created or deleted here):
        a taken folder without --overwrite, a folder that is no grpokit run with it, one that holds `keep` (the
        recipe, the data), the root, home, a git work tree, an unwritable place (grpokit.run.ownership). `kinds`:
        the records --overwrite may replace (the demo: only a demo)."""
        refuse_output_dir(self.path, overwrite, keep, kinds)

    def open_new(self, recipe, overwrite: bool, lock=None, note: Callable[[str], None] = note):
        """Create (with --overwrite: clear the recorded entries of) the folder of a run that can start, and write its
        record (kind `self.kind`, the layout's entries reserved, the lock's token); (the held lock, created by us)."""
        created = not self.path.exists()
        make_folder(self.path)
        lock = lock or self.lock(note).acquire()  # refused: another run started here meanwhile, its folder
        try:
            self.refuse_existing(overwrite)  # again under the lock: another run may have started here meanwhile
            if overwrite:
                self.clear()
            # A new record (a new run, or --overwrite's fresh start) reserves the layout before anything is written:
            # a name of it still there is not grpokit's (clear() removed every recorded one), so it is refused.
            refuse_foreign(self.path, None, own_entries(), _NEW_DIR_FIX)
            write_record(self.path, new_record(self.kind, own_entries(), lock_token=lock.token))
            self.write_config(recipe)
        except BaseException:
            lock.release()
            if created:
                remove_made(self.path)
            raise
        return lock, created

    def evaluation_lock(self, what: str, fix: str | None = None):
        """The lock an evaluation of this run holds on eval/ (grpokit.evaluation.evaluate_run), taken by a command
        that removes what an evaluation reads or writes (train --overwrite, a health rollback): refused at once
        while an evaluation runs, and no evaluation starts while it is held. Nothing to hold without eval/."""
        if not self.eval_dir.is_dir() or self.eval_dir.is_symlink():
            return contextlib.nullcontext()
        return FolderLock(self.eval_dir, what, fix)

    def clear(self) -> list[str]:
        """Delete an earlier run's files (--overwrite): grpokit's own entries only, never the lock or a user's file."""
        return clear_run(self.path)

    def free_bytes(self) -> int:
        where = self.path  # a run not created yet (runs/new/ under a runs/ that does not exist either): its disk
        while not where.exists() and where.parent != where:
            where = where.parent
        return shutil.disk_usage(where).free


def describe_lineage(lineage: dict | None) -> str | None:
    """run.json's `init_from` (grpokit.training.lineage writes it) as one line for the report and the terminal."""
    if not isinstance(lineage, dict) or not lineage:  # a damaged run.json: no lineage to tell
        return None
    if lineage.get("run"):
        step = lineage.get("step")
        line = f"started from {lineage['run']} step {step} ({lineage['kind']})"
        differs = lineage.get("prompt_differs")
        if isinstance(differs, list) and differs:  # grpokit.training.lineage: the warm start saw other prompts
            line += (f"; note: that run's {', '.join(map(str, differs))} differ from this recipe's, so the model "
                     "was warmed up on prompts this run does not show it")
        return line
    return f"started from the model folder {lineage['path']}"
