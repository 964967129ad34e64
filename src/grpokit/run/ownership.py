"""Which folders grpokit may train into, and what `--overwrite` may delete: what grpokit recorded writing, nothing else.

    refuse_output_dir(path, overwrite, keep=[recipe, data])   # before any model loads: where, what, fix
    clear_run(path)                                           # --overwrite: the entries of the run's record only
    is_run_dir(path)                                          # a record (grpokit.run.record) of kind run or demo

A folder is a grpokit run directory only by its record (`.grpokit-record.json`, grpokit.run.record), written
when grpokit creates or claims the folder; the names inside it (a config.yaml with `data` and `rewards`, a
run.json) prove nothing. `--overwrite` clears only such a folder, and only the entries its record names (the
layout of docs/run-directory.md, `own_entries()`), each checked to be still what grpokit wrote (a link or a
hard-linked file at such a name is refused, not removed); anything else in it (a user's notes, a data file)
stays. A demo replaces only an earlier demo (`kinds=("demo",)`). Refused whatever they hold: the file system's
root, the home folder and its ancestors, a git work tree, a folder that holds the recipe or the data. A folder
that cannot be written is refused too, by trying (a root user ignores permission bits, so `os.access` would
not tell).

Runs made before records (a config.yaml and run.json of grpokit's, no record: `legacy_run`) can still be
resumed, evaluated, reported and exported; `--overwrite` (and the demo) refuses them with the fix (delete the
folder yourself, or pick a new one): nothing is deleted on a guess.

Not covered: files a user put inside grpokit's own folders (checkpoints/, eval/, ...): those folders are
grpokit's and go whole.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from grpokit.errors import GrpokitError, Problem
from grpokit.run import layout
from grpokit.run.layout import LOCK_FILE
from grpokit.run.record import RECORD_FILE, read_record, record_problem
from grpokit.run.temporaries import contents
from grpokit.run.claims import remove_entries

_MAX_CONFIG_BYTES = 1 << 20  # a run's config.yaml is a few KB; a larger one is not grpokit's (and not worth parsing)
_NEW_DIR_FIX = "pick a new --output-dir (a folder that does not exist yet, or an earlier grpokit run directory)"
RUN_KINDS = ("run", "demo")


def _recipe_config(path: Path) -> bool:
    import yaml

    try:
        if path.stat().st_size > _MAX_CONFIG_BYTES:
            return False
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return False
    return isinstance(data, dict) and "data" in data and "rewards" in data


def _run_status(path: Path) -> bool:
    from grpokit.run.files import read_json

    data = read_json(path, note=lambda _: None) if path.is_file() else None
    return data is not None and data.get("status") in layout.STATUSES


def is_run_dir(path: str | Path, kinds=RUN_KINDS) -> bool:
    """A folder grpokit trained into: its record says so (see the module docstring)."""
    record = read_record(path) if Path(path).is_dir() else None
    return record is not None and record["kind"] in kinds


def legacy_run(path: str | Path) -> bool:
    """A run written before records: a recipe's config.yaml and a run.json of grpokit's, no record. Usable (resume,
    eval, report, export); never cleared, since nothing proves which of its files grpokit wrote."""
    path = Path(path)
    return (path.is_dir() and not os.path.lexists(path / RECORD_FILE) and _recipe_config(path / layout.CONFIG_FILE)
            and _run_status(path / layout.RUN_FILE))


def refuse_unproven(path: str | Path, kinds, fix: str) -> None:
    """Before a command writes into a folder it did not just make (a run's eval/, report/ or export/, a reward
    model's eval/): refused unless its record says it is of one of `kinds` (a run from before records,
    `legacy_run`, counts as a run). A folder that only holds the right file names (a `config.yaml`, a
    `metrics.jsonl`, an `rm.json`) is not grpokit's."""
    path = Path(path)
    record = read_record(path) if path.is_dir() else None
    if (record is not None and record["kind"] in kinds) or (set(kinds) & set(RUN_KINDS) and legacy_run(path)):
        return
    what = "a grpokit run" if set(kinds) & set(RUN_KINDS) else f"a grpokit {' or '.join(kinds)} folder"
    why = record_problem(path) or (f"its {RECORD_FILE} says kind {record['kind']}" if record else
                                   f"no {RECORD_FILE}; the names of its files prove nothing")
    raise GrpokitError([Problem(str(path), f"is not {what} ({why}): grpokit writes into a folder it did not just "
                                "make only when its record proves grpokit made it, so nothing was written", fix)],
                       title=f"not {what}")


def refuse_unproven_run(path: str | Path, fix: str) -> None:
    """`refuse_unproven` for a run (or a demo) before eval, report or export write into its own folders."""
    refuse_unproven(path, RUN_KINDS, fix)


def _holds(folder: Path, item: Path) -> bool:
    return item == folder or folder in item.parents


def _protected(path: Path, keep: list[Path]) -> str | None:
    """Why `path` may never be a run directory, or None."""
    try:
        home = Path.home().resolve()
    except (RuntimeError, KeyError):  # no HOME and no passwd entry: there is no home folder to protect
        home = None
    if path.parent == path:
        return "is the root of the file system"
    if home is not None and _holds(path, home):
        return "is your home folder" if path == home else f"holds your home folder ({home})"
    if (path / ".git").exists():
        return "is a git work tree (it has a .git)"
    for item in keep:
        if _holds(path, item):
            return f"holds {item}, which this run reads"
    return None


def writable_problem(path: Path) -> Problem | None:
    """A Problem when nothing can be written at `path` (or, not there yet, in its nearest existing parent)."""
    probe_dir = path
    while not probe_dir.exists() and probe_dir.parent != probe_dir:
        probe_dir = probe_dir.parent
    try:
        fd, name = tempfile.mkstemp(prefix=".grpokit-write-check-", dir=probe_dir)
        os.close(fd)
        os.unlink(name)
    except OSError as e:
        where = "" if probe_dir == path else f" (nor in {probe_dir}, where it would be created)"
        return Problem(str(path), f"cannot write here{where}: {e.strerror or e}",
                       "pick an --output-dir you can write to (check the folder's permissions, or whether its disk "
                       "is mounted read-only)")
    return None


def _not_replaceable(path: Path, kinds) -> str | None:
    """Why training may not replace what is in `path` (a folder that holds more than a lock), or None. Said without
    naming --overwrite: the demo and a user who never passed it get the same true reason."""
    record = read_record(path)
    if record is not None and record["kind"] in kinds:
        return None
    if record is not None and record["kind"] in RUN_KINDS:  # the demo, meeting a training run
        return (f"is a grpokit training run (its {RECORD_FILE} says kind {record['kind']}), and the demo replaces "
                "only an earlier demo: nothing was deleted")
    damaged = record_problem(path)
    if damaged:
        return f"{damaged}: nothing was written or deleted there"
    if legacy_run(path):
        return (f"is a run of a grpokit from before authorship records (no {RECORD_FILE}): nothing proves which "
                f"of its files grpokit wrote, so none is deleted (resume, eval, report and export still work); to "
                f"start again, delete it yourself (`rm -r {path}`) or pick a new --output-dir")
    return (f"is not empty and not a grpokit run directory (no {RECORD_FILE} written by grpokit): grpokit trains "
            "only into a new or empty folder or one of its own runs, so nothing was written or deleted")


def refuse_output_dir(path: str | Path, overwrite: bool | None, keep: list[str | Path] = (), kinds=RUN_KINDS) -> None:
    """Refuse a run directory that training may not use, before anything loads (nothing is created or deleted).

    `keep`: files the run reads (the recipe, the data); a folder that holds one is never a run directory.
    `kinds`: the records --overwrite may replace (the demo: only a demo). `overwrite` None: not known yet
    (`recipe check`): what train refuses with and without --overwrite is refused; a grpokit run there is not.
    Only a folder --overwrite would replace is answered with --overwrite: any other is refused for its reason.
    """
    raw = str(path)
    if not raw.strip():
        raise GrpokitError([Problem("--output-dir / output_dir", "is empty (it would mean the current folder)",
                                    _NEW_DIR_FIX)])
    path = Path(path).resolve()
    if path.exists() and not path.is_dir():
        raise GrpokitError([Problem(str(path), "exists and is not a directory", _NEW_DIR_FIX)])
    why = _protected(path, [Path(k).resolve() for k in keep if k])
    if why:
        raise GrpokitError([Problem(str(path), f"cannot be a run directory: it {why}", _NEW_DIR_FIX)])
    problem = writable_problem(path)
    if problem:
        raise GrpokitError([problem])
    if not path.is_dir() or not contents(path, ignore=(LOCK_FILE,)):  # a killed writer's temporaries: nothing
        return
    record = read_record(path)
    if record is not None and record["kind"] in kinds and not contents(path, ignore=(LOCK_FILE, RECORD_FILE)):
        return  # a run killed before it wrote anything but its record: nothing there to keep or replace
    why = _not_replaceable(path, kinds)
    if why:
        raise GrpokitError([Problem(str(path), why, _NEW_DIR_FIX)])
    if overwrite is False:
        raise GrpokitError([Problem(str(path), "run directory already exists and is not empty",
                                    f"continue it with `grpokit train --resume {path}`, pick another "
                                    "--output-dir, or pass --overwrite to start again")])


def clear_run(path: str | Path) -> list[str]:
    """Delete an earlier run's entries (--overwrite): those its record names, never the lock, the record or a user's
    file; the names removed. A folder without a run record loses nothing."""
    record = read_record(path)
    if record is None or record["kind"] not in RUN_KINDS:
        return []
    return remove_entries(path, record)
